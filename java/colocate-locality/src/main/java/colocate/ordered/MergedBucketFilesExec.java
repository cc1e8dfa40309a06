package colocate.ordered;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;

import org.apache.spark.Partition;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BaseOrdering;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.RowOrdering;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.GenerateOrdering;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.FilePartition;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.types.DataType;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * Reads a colocated bucket whose files are each sorted by the bucket key but are several a
 * partition (a split group's family: one file per finer bucket; an append's carried files) or
 * several buckets a task (a coalesced read), as one stream in (partition column, bucket key)
 * order: the files of one partition value are merged k ways, partition values in ascending order.
 *
 * <p>Why: Spark reads a task's files one after the other, so it sorts such a bucket again for a
 * merge join, although every file was written sorted. Each file is read through the scan's own RDD
 * (its reader, its failures naming the file, its metrics), one file a sub-partition, and only the
 * files of one partition value are open at once. {@link AssertOrderedExec} above still checks the
 * order row by row, so a file that is not sorted stops the query instead of joining wrongly.
 */
public final class MergedBucketFilesExec extends SparkPlan {
    static final String NODE_NAME = "ColocateMergedBucketFiles";
    private final Seq<SortOrder> sortOrder;
    private final SparkPlan child;
    private final int partitionIndex;  // the partition column's index among the scan's partition values, -1: none
    private final DataType partitionType;

    public MergedBucketFilesExec(Seq<SortOrder> sortOrder, SparkPlan child, int partitionIndex, DataType partitionType) {
        this.sortOrder = sortOrder;
        this.child = child;
        this.partitionIndex = partitionIndex;
        this.partitionType = partitionType;
    }

    @Override
    public Seq<Attribute> output() {
        return child.output();
    }

    @Override
    public Seq<SparkPlan> children() {
        return CollectionConverters.asScala(List.of(child)).toList();
    }

    @Override
    public SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> newChildren) {
        return new MergedBucketFilesExec(sortOrder, newChildren.apply(0), partitionIndex, partitionType);
    }

    @Override
    public Seq<SortOrder> outputOrdering() {
        return sortOrder;
    }

    @Override
    public Partitioning outputPartitioning() {
        return child.outputPartitioning();
    }

    @Override
    public String nodeName() {
        return NODE_NAME;
    }

    @Override
    public RDD<InternalRow> doExecute() {
        List<Expression> keys = new ArrayList<>();
        List<SortOrder> bound = new ArrayList<>();
        Seq<Expression> none = CollectionConverters.asScala(new ArrayList<Expression>()).toList();
        int i = 0;
        for (SortOrder order : CollectionConverters.asJava(sortOrder)) {
            Expression key = order.child();
            keys.add(key);
            bound.add(new SortOrder(new BoundReference(i++, key.dataType(), key.nullable()),
                    order.direction(), order.nullOrdering(), none));
        }
        Merge merge = new Merge(CollectionConverters.asScala(keys).toList(), child.output(),
                CollectionConverters.asScala(bound).toList(), partitionIndex, partitionType);
        return new MergeRDD(child.execute(), merge);
    }

    @Override
    public int productArity() {
        return 4;
    }

    @Override
    public Object productElement(int n) {
        switch (n) {
            case 0: return sortOrder;
            case 1: return child;
            case 2: return partitionIndex;
            case 3: return partitionType;
            default: throw new IndexOutOfBoundsException(String.valueOf(n));
        }
    }

    @Override
    public boolean canEqual(Object that) {
        return that instanceof MergedBucketFilesExec;
    }

    @Override
    public boolean equals(Object that) {
        if (!(that instanceof MergedBucketFilesExec)) {
            return false;
        }
        MergedBucketFilesExec o = (MergedBucketFilesExec) that;
        return sortOrder.equals(o.sortOrder) && child.equals(o.child) && partitionIndex == o.partitionIndex;
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(sortOrder, child, partitionIndex);
    }

    /** The scan's RDD with each task's files merged: same partitions, same preferred hosts. */
    static final class MergeRDD extends RDD<InternalRow> {
        private final RDD<InternalRow> parent;
        private final Merge merge;

        MergeRDD(RDD<InternalRow> parent, Merge merge) {
            super(parent, ClassTag$.MODULE$.apply(InternalRow.class));
            this.parent = parent;
            this.merge = merge;
        }

        @Override
        public Partition[] getPartitions() {
            return parent.partitions();
        }

        @Override
        public Seq<String> getPreferredLocations(Partition split) {
            return parent.preferredLocations(split);
        }

        @Override
        public Iterator<InternalRow> compute(Partition split, TaskContext context) {
            if (!(split instanceof FilePartition) || ((FilePartition) split).files().length <= 1) {
                return parent.iterator(split, context);
            }
            FilePartition whole = (FilePartition) split;
            List<List<PartitionedFile>> groups = merge.groups(whole.files());
            return new AbstractIterator<InternalRow>() {
                private int next;
                private Iterator<InternalRow> current = Iterator.empty();

                @Override
                public boolean hasNext() {
                    while (!current.hasNext() && next < groups.size()) {
                        List<Iterator<InternalRow>> streams = new ArrayList<>();
                        for (PartitionedFile file : groups.get(next++)) {
                            streams.add(parent.iterator(new FilePartition(whole.index(), new PartitionedFile[]{file}),
                                    context));
                        }
                        current = streams.size() == 1 ? streams.get(0) : merge.merged(streams);
                    }
                    return current.hasNext();
                }

                @Override
                public InternalRow next() {
                    if (!hasNext()) {
                        throw new java.util.NoSuchElementException();
                    }
                    return current.next();
                }
            };
        }
    }

    /** The executor side: files grouped by partition value, and the k-way merge of one group. */
    static final class Merge implements Serializable {
        private final Seq<Expression> keys;
        private final Seq<Attribute> input;
        private final Seq<SortOrder> bound;
        private final int partitionIndex;
        private final DataType partitionType;

        Merge(Seq<Expression> keys, Seq<Attribute> input, Seq<SortOrder> bound, int partitionIndex,
              DataType partitionType) {
            this.keys = keys;
            this.input = input;
            this.bound = bound;
            this.partitionIndex = partitionIndex;
            this.partitionType = partitionType;
        }

        List<List<PartitionedFile>> groups(PartitionedFile[] files) {
            if (partitionIndex < 0) {
                return List.of(List.of(files));
            }
            Map<Object, List<PartitionedFile>> byValue = new LinkedHashMap<>();
            Map<Object, InternalRow> valueRows = new LinkedHashMap<>();
            for (PartitionedFile file : files) {
                Object value = file.partitionValues().isNullAt(partitionIndex) ? null
                        : file.partitionValues().get(partitionIndex, partitionType);
                byValue.computeIfAbsent(value, v -> new ArrayList<>()).add(file);
                valueRows.putIfAbsent(value, new GenericInternalRow(new Object[]{value}));
            }
            BaseOrdering ordering = RowOrdering.createNaturalAscendingOrdering(
                    CollectionConverters.asScala(List.of(partitionType)).toList());
            List<Object> values = new ArrayList<>(byValue.keySet());
            values.sort((a, b) -> ordering.compare(valueRows.get(a), valueRows.get(b)));
            List<List<PartitionedFile>> out = new ArrayList<>();
            for (Object value : values) {
                out.add(byValue.get(value));
            }
            return out;
        }

        Iterator<InternalRow> merged(List<Iterator<InternalRow>> streams) {
            BaseOrdering ordering = (BaseOrdering) GenerateOrdering.generate(bound);
            int k = streams.size();
            UnsafeProjection[] projections = new UnsafeProjection[k];
            InternalRow[] heads = new InternalRow[k];
            UnsafeRow[] headKeys = new UnsafeRow[k];
            PriorityQueue<Integer> queue = new PriorityQueue<>(k, (a, b) -> {
                int c = ordering.compare(headKeys[a], headKeys[b]);
                return c != 0 ? c : Integer.compare(a, b);
            });
            for (int i = 0; i < k; i++) {
                projections[i] = UnsafeProjection.create(keys, input);
                if (streams.get(i).hasNext()) {
                    heads[i] = streams.get(i).next();
                    headKeys[i] = projections[i].apply(heads[i]);
                    queue.add(i);
                }
            }
            return new AbstractIterator<InternalRow>() {
                private int pending = -1;  // the stream whose row was handed out last: advanced on the next call

                private void advance() {
                    if (pending >= 0) {
                        int i = pending;
                        pending = -1;
                        if (streams.get(i).hasNext()) {
                            heads[i] = streams.get(i).next();
                            headKeys[i] = projections[i].apply(heads[i]);
                            queue.add(i);
                        }
                    }
                }

                @Override
                public boolean hasNext() {  // the row handed out last stays valid until next()
                    return !queue.isEmpty() || (pending >= 0 && streams.get(pending).hasNext());
                }

                @Override
                public InternalRow next() {
                    advance();
                    if (queue.isEmpty()) {
                        throw new java.util.NoSuchElementException();
                    }
                    int i = queue.poll();
                    pending = i;
                    return heads[i];
                }
            };
        }
    }
}
