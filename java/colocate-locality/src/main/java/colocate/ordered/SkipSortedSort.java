package colocate.ordered;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SortExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.internal.SQLConf;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Replaces the sort Spark puts over a colocated bucket with {@link AssertOrderedExec}, when the
 * bucket's files already hold the rows in the sort's order.
 *
 * <p>A colocate backing table is partitioned by (partition column, {@code __bucket}) and each
 * (partition, bucket) directory holds one file sorted by the bucket key (the write and the import
 * sort it so). Read partition by partition in ascending order ({@link OrderedFileIndex}), a
 * bucket's rows are therefore sorted by (partition column, bucket key...), which is the order a
 * sort-merge join on {@code (dt, id)} asks for. Spark 4 cannot see that: its bucketed scan
 * reports an order only when every bucket is one file, and only on the bucket key.
 *
 * <p>The sort stays whenever anything is not as described: another table, a scan that is not
 * bucketed or coalesces buckets, a sort that is not a prefix of that order (descending, nulls
 * last, other columns), anything but projections and filters between sort and scan, a directory
 * with more than one file. What remains is checked row by row.
 */
public final class SkipSortedSort extends Rule<SparkPlan> {
    public static final String ENABLED = "spark.colocate.sortedScan";
    static final String BACKING_PREFIX = "__cl_";
    static final String BUCKET_COLUMN = "__bucket";

    @Override
    public SparkPlan apply(SparkPlan plan) {
        if (!"true".equalsIgnoreCase(SQLConf.get().getConfString(ENABLED, "true").trim())) {
            return plan;
        }
        return rewrite(plan);
    }

    private SparkPlan rewrite(SparkPlan plan) {
        if (plan instanceof SortExec && !((SortExec) plan).global()) {
            SparkPlan done = skip((SortExec) plan);
            if (done != null) {
                return done;
            }
        }
        List<SparkPlan> children = CollectionConverters.asJava(plan.children());
        List<SparkPlan> rewritten = new ArrayList<>(children.size());
        boolean changed = false;
        for (SparkPlan child : children) {
            SparkPlan now = rewrite(child);
            changed |= now != child;
            rewritten.add(now);
        }
        return changed ? plan.withNewChildren(CollectionConverters.asScala(rewritten).toList()) : plan;
    }

    /** Also used by {@link ColumnarJoinRule}: neither rewrites a plan whose expressions run a subquery. */
    static boolean holdsSubquery(Expression e) {
        if (e instanceof PlanExpression) {
            return true;
        }
        for (Expression child : CollectionConverters.asJava(e.children())) {
            if (holdsSubquery(child)) {
                return true;
            }
        }
        return false;
    }

    /** The sort asks for a prefix of {@code order}, ascending with nulls first, on scanned columns. */
    private static boolean isPrefix(List<SortOrder> wanted, List<String> order, List<Attribute> scanned) {
        if (wanted.isEmpty() || wanted.size() > order.size()) {
            return false;
        }
        for (int i = 0; i < wanted.size(); i++) {
            SortOrder sortOrder = wanted.get(i);
            if (sortOrder.direction() != Ascending$.MODULE$ || sortOrder.nullOrdering() != NullsFirst$.MODULE$
                    || !(sortOrder.child() instanceof Attribute)) {
                return false;
            }
            Attribute key = (Attribute) sortOrder.child();
            boolean fromScan = scanned.stream().anyMatch(a -> a.exprId().equals(key.exprId()));
            if (!fromScan || !key.name().toLowerCase(Locale.ROOT).equals(order.get(i))) {
                return false;
            }
        }
        return true;
    }

    /** The sort's replacement, or null when the sort must stay. */
    private static SparkPlan skip(SortExec sort) {
        List<SparkPlan> between = new ArrayList<>();
        SparkPlan node = sort.child();
        while (node instanceof ProjectExec || node instanceof FilterExec) {
            between.add(node);
            node = node.children().head();
        }
        if (!(node instanceof FileSourceScanExec)) {
            return null;
        }
        FileSourceScanExec scan = (FileSourceScanExec) node;
        if (scan.tableIdentifier().isEmpty() || !scan.tableIdentifier().get().table().startsWith(BACKING_PREFIX)
                || !scan.bucketedScan() || scan.optionalNumCoalescedBuckets().isDefined()) {
            return null;
        }
        HadoopFsRelation relation = scan.relation();
        if (relation.bucketSpec().isEmpty()) {
            return null;
        }
        // The order a bucket's rows come in: partition column (if any), then the bucket key; and,
        // when the scan reads one partition, the bucket key alone.
        String partitionColumn = null;
        int partitionIndex = -1;
        String[] partitionColumns = relation.partitionSchema().fieldNames();
        for (int i = 0; i < partitionColumns.length; i++) {
            if (!partitionColumns[i].equalsIgnoreCase(BUCKET_COLUMN)) {
                if (partitionColumn != null) {
                    return null;
                }
                partitionColumn = partitionColumns[i].toLowerCase(Locale.ROOT);
                partitionIndex = i;
            }
        }
        if (partitionColumns.length != (partitionColumn == null ? 1 : 2)) {
            return null;
        }
        List<String> bucketKey = new ArrayList<>();
        for (String column : CollectionConverters.asJava(relation.bucketSpec().get().bucketColumnNames())) {
            bucketKey.add(column.toLowerCase(Locale.ROOT));
        }
        List<String> streamOrder = new ArrayList<>(bucketKey);
        if (partitionColumn != null) {
            streamOrder.add(0, partitionColumn);
        }
        List<SortOrder> wanted = CollectionConverters.asJava(sort.sortOrder());
        List<Attribute> scanned = CollectionConverters.asJava(scan.output());
        boolean inStreamOrder = isPrefix(wanted, streamOrder, scanned);
        boolean onePartitionEnough = partitionColumn != null && isPrefix(wanted, bucketKey, scanned);
        if (!inStreamOrder && !onePartitionEnough) {
            return null;
        }
        // The static filters, as the scan lists its files with them (a dynamic pruning filter only
        // drops partitions at run time, which keeps the order), so the scan reuses this listing.
        List<Expression> staticFilters = new ArrayList<>();
        for (Expression filter : CollectionConverters.asJava(scan.partitionFilters())) {
            if (!holdsSubquery(filter)) {
                staticFilters.add(filter);
            }
        }
        OrderedFileIndex index = new OrderedFileIndex(relation.location());
        Seq<PartitionDirectory> listing = index.listFiles(CollectionConverters.asScala(staticFilters).toList(), scan.dataFilters());
        java.util.Set<Object> values = new java.util.HashSet<>();
        for (PartitionDirectory dir : CollectionConverters.asJava(listing)) {
            if (dir.files().size() > 1) {
                return null;
            }
            if (partitionIndex >= 0) {
                values.add(dir.values().get(partitionIndex, relation.partitionSchema().fields()[partitionIndex].dataType()));
            }
        }
        if (!inStreamOrder && values.size() > 1) {
            return null;
        }
        HadoopFsRelation ordered = new HadoopFsRelation(index, relation.partitionSchema(), relation.dataSchema(),
                relation.bucketSpec(), relation.fileFormat(), relation.options(), relation.sparkSession());
        SparkPlan rebuilt = withRelation(scan, ordered);
        for (int i = between.size() - 1; i >= 0; i--) {
            rebuilt = between.get(i).withNewChildren(CollectionConverters.asScala(List.of(rebuilt)).toList());
        }
        String table = scan.tableIdentifier().get().table().substring(BACKING_PREFIX.length());
        return new AssertOrderedExec(sort.sortOrder(), rebuilt, table);
    }

    /**
     * {@code scan.copy(relation = ordered)} on every Spark 4 line: the case class's {@code copy} takes
     * ten fields on 4.0-4.2 and eleven on 4.3 (it added {@code markedForSingleTaskExecution}), so
     * the call goes through reflection, every field but the first from its {@code copy$default$N},
     * i.e. the scan's own value.
     */
    static SparkPlan withRelation(FileSourceScanExec scan, HadoopFsRelation relation) {
        try {
            java.lang.reflect.Method copy = null;
            for (java.lang.reflect.Method m : scan.getClass().getMethods()) {
                if (m.getName().equals("copy") && m.getParameterCount() > 0
                        && m.getParameterTypes()[0] == HadoopFsRelation.class) {
                    copy = m;
                }
            }
            if (copy == null) {
                throw new IllegalStateException("FileSourceScanExec has no copy(HadoopFsRelation, ...)");
            }
            Object[] args = new Object[copy.getParameterCount()];
            args[0] = relation;
            for (int i = 1; i < args.length; i++) {
                args[i] = scan.getClass().getMethod("copy$default$" + (i + 1)).invoke(scan);
            }
            return (SparkPlan) copy.invoke(scan, args);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot copy " + scan.nodeName() + " with the ordered file index", e);
        }
    }
}
