package colocate.ordered;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.execution.datasources.FileSourceStrategy$;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Plans the scan of a colocate backing table that carries {@value #PROPERTY} (a table of a group
 * created at k·N buckets, read in a join with a group of N) as Spark's coalesced bucketed scan:
 * task b reads the table's buckets b, b+N, ..., b+(k-1)N, each from its own replica directory,
 * and the scan reports {@code HashPartitioning(key, N)}, so the join with the N-bucket side plans
 * no Exchange.
 *
 * <p>Why a planner strategy and not Spark's own {@code CoalesceBucketsInJoin}: that rule coalesces
 * only when a join's keys are exactly the bucket key and both inputs are scans, so the seeds'
 * {@code (dt, id)} joins and every join over another join would shuffle. The nesting that makes it
 * right, {@code pmod(h, kN) mod N = pmod(h, N)}, holds whatever the query; the strategy runs
 * before EnsureRequirements places its exchanges, in the adaptive planner and the other.
 *
 * <p>Nothing is coalesced unless the table asks for it, the count divides the table's own, and
 * the scan is bucketed; the files keep their names and the view's guard still checks every row
 * against its own finer bucket.
 */
public final class CoalescedBucketScan extends SparkStrategy {
    public static final String PROPERTY = "colocate.read.buckets";

    @Override
    public Seq<SparkPlan> apply(LogicalPlan plan) {
        LogicalPlan node = plan;
        while (node instanceof Project || node instanceof Filter) {
            node = node.children().head();
        }
        if (!(node instanceof LogicalRelation)) {
            return CollectionConverters.asScala(new ArrayList<SparkPlan>()).toList();
        }
        int count = wanted((LogicalRelation) node);
        if (count <= 0) {
            return CollectionConverters.asScala(new ArrayList<SparkPlan>()).toList();
        }
        List<SparkPlan> out = new ArrayList<>();
        for (SparkPlan planned : CollectionConverters.asJava(FileSourceStrategy$.MODULE$.apply(plan))) {
            out.add(coalesce(planned, count));
        }
        return CollectionConverters.asScala(out).toList();
    }

    /** The count the table asks to be read at, or 0. */
    private static int wanted(LogicalRelation relation) {
        Option<CatalogTable> table = relation.catalogTable();
        if (table.isEmpty() || !table.get().identifier().table().startsWith(SkipSortedSort.BACKING_PREFIX)) {
            return 0;
        }
        Option<String> value = table.get().properties().get(PROPERTY);
        if (value.isEmpty()) {
            return 0;
        }
        try {
            return Integer.parseInt(value.get().trim());
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private static SparkPlan coalesce(SparkPlan plan, int count) {
        if (plan instanceof FileSourceScanExec) {
            FileSourceScanExec scan = (FileSourceScanExec) plan;
            if (scan.relation().bucketSpec().isEmpty() || !scan.bucketedScan()
                    || scan.optionalNumCoalescedBuckets().isDefined()) {
                return plan;
            }
            int own = scan.relation().bucketSpec().get().numBuckets();
            if (count >= own || own % count != 0) {
                return plan;
            }
            return withCoalesced(scan, count);
        }
        List<SparkPlan> children = CollectionConverters.asJava(plan.children());
        if (children.isEmpty()) {
            return plan;
        }
        List<SparkPlan> rewritten = new ArrayList<>();
        boolean changed = false;
        for (SparkPlan child : children) {
            SparkPlan now = coalesce(child, count);
            changed |= now != child;
            rewritten.add(now);
        }
        return changed ? plan.withNewChildren(CollectionConverters.asScala(rewritten).toList()) : plan;
    }

    /**
     * {@code scan.copy(optionalNumCoalescedBuckets = Some(count))} on every Spark 4 line: the case
     * class's fields differ between lines, so the one parameter typed {@code Option<Object>} (the
     * boxed count) is set and every other is the scan's own ({@code copy$default$N}). A scan that
     * cannot be copied so is left as it is: Spark then shuffles, which is slower, never wrong.
     */
    private static SparkPlan withCoalesced(FileSourceScanExec scan, int count) {
        try {
            Method copy = null;
            for (Method m : scan.getClass().getMethods()) {
                if (m.getName().equals("copy") && m.getParameterCount() > 0) {
                    copy = m;
                }
            }
            if (copy == null) {
                return scan;
            }
            java.lang.reflect.Type[] types = copy.getGenericParameterTypes();
            int at = -1;
            for (int i = 0; i < types.length; i++) {
                if (types[i].getTypeName().equals("scala.Option<java.lang.Object>")) {
                    if (at >= 0) {
                        return scan;
                    }
                    at = i;
                }
            }
            if (at < 0) {
                return scan;
            }
            Object[] args = new Object[types.length];
            for (int i = 0; i < args.length; i++) {
                args[i] = i == at ? Option.apply((Object) Integer.valueOf(count))
                        : scan.getClass().getMethod("copy$default$" + (i + 1)).invoke(scan);
            }
            FileSourceScanExec done = (FileSourceScanExec) copy.invoke(scan, args);
            return done.optionalNumCoalescedBuckets().isDefined() ? done : scan;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return scan;
        }
    }
}
