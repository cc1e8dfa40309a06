package colocate.ordered;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BaseOrdering;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.GenerateOrdering;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.types.ByteType$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType$;
import org.apache.spark.sql.types.IntegerType$;
import org.apache.spark.sql.types.LongType$;
import org.apache.spark.sql.types.ShortType$;
import org.apache.spark.sql.types.TimestampNTZType$;
import org.apache.spark.sql.types.TimestampType$;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Stands where Spark would sort a colocated bucket: passes its rows through unchanged, in the
 * order the files hold them, and stops the query at the first row that sorts before the one
 * read before it.
 *
 * <p>A sort-merge join trusts its inputs' order; a row out of order would make it miss matches
 * and return wrong rows without a word. The files are written sorted, and this check is what
 * makes that an invariant instead of an assumption: disorder fails the query, naming the table
 * and bucket. Keys of integral types (the usual bucket keys and date partitions) are compared as
 * longs read straight from the row, with nothing allocated or projected: the check is on every
 * row of the join's input, and the projections it used before cost a tenth of the join's time
 * (JFR profile of the seeds' SQL1). Other key types are kept by two projections used in turn, so
 * no row is copied.
 */
public final class AssertOrderedExec extends SparkPlan {
    private final Seq<SortOrder> sortOrder;
    private final SparkPlan child;
    private final String table;

    public AssertOrderedExec(Seq<SortOrder> sortOrder, SparkPlan child, String table) {
        this.sortOrder = sortOrder;
        this.child = child;
        this.table = table;
    }

    public Seq<SortOrder> sortOrder() {
        return sortOrder;
    }

    public SparkPlan child() {
        return child;
    }

    public String table() {
        return table;
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
        return new AssertOrderedExec(sortOrder, newChildren.apply(0), table);
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
        return "ColocateOrderedBucket";
    }

    @Override
    public RDD<InternalRow> doExecute() {
        List<Expression> keys = new ArrayList<>();
        List<SortOrder> bound = new ArrayList<>();
        List<String> names = new ArrayList<>();
        Seq<Expression> none = CollectionConverters.asScala(new ArrayList<Expression>()).toList();
        int i = 0;
        for (SortOrder order : CollectionConverters.asJava(sortOrder)) {
            Expression key = order.child();
            keys.add(key);
            names.add(key instanceof Attribute ? ((Attribute) key).name() : key.sql());
            bound.add(new SortOrder(new BoundReference(i++, key.dataType(), key.nullable()),
                    order.direction(), order.nullOrdering(), none));
        }
        Check check = new Check(CollectionConverters.asScala(keys).toList(), child.output(),
                CollectionConverters.asScala(bound).toList(), table, String.join(", ", names));
        return child.execute().mapPartitionsInternal(check, true, ClassTag$.MODULE$.apply(InternalRow.class));
    }

    @Override
    public int productArity() {
        return 3;
    }

    @Override
    public Object productElement(int n) {
        switch (n) {
            case 0: return sortOrder;
            case 1: return child;
            case 2: return table;
            default: throw new IndexOutOfBoundsException(String.valueOf(n));
        }
    }

    @Override
    public boolean canEqual(Object that) {
        return that instanceof AssertOrderedExec;
    }

    @Override
    public boolean equals(Object that) {
        if (!(that instanceof AssertOrderedExec)) {
            return false;
        }
        AssertOrderedExec o = (AssertOrderedExec) that;
        return sortOrder.equals(o.sortOrder) && child.equals(o.child) && table.equals(o.table);
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(sortOrder, child, table);
    }

    /** The executor side: the checking iterator over one bucket's rows. */
    static final class Check extends AbstractFunction1<Iterator<InternalRow>, Iterator<InternalRow>>
            implements Serializable {
        private final Seq<Expression> keys;
        private final Seq<Attribute> input;
        private final Seq<SortOrder> bound;
        private final String table;
        private final String keyNames;

        Check(Seq<Expression> keys, Seq<Attribute> input, Seq<SortOrder> bound, String table, String keyNames) {
            this.keys = keys;
            this.input = input;
            this.bound = bound;
            this.table = table;
            this.keyNames = keyNames;
        }

        @Override
        public Iterator<InternalRow> apply(Iterator<InternalRow> rows) {
            int bucket = TaskContext.getPartitionId();
            Primitive primitive = Primitive.of(keys, input, bound);
            if (primitive != null) {
                return new AbstractIterator<InternalRow>() {
                    private long count;

                    @Override
                    public boolean hasNext() {
                        return rows.hasNext();
                    }

                    @Override
                    public InternalRow next() {
                        InternalRow row = rows.next();
                        if (!primitive.advance(row)) {
                            throw disorder(bucket, count);
                        }
                        count++;
                        return row;
                    }
                };
            }
            UnsafeProjection[] projections = {UnsafeProjection.create(keys, input), UnsafeProjection.create(keys, input)};
            BaseOrdering ordering = (BaseOrdering) GenerateOrdering.generate(bound);
            return new AbstractIterator<InternalRow>() {
                private UnsafeRow previous;
                private int turn;
                private long count;

                @Override
                public boolean hasNext() {
                    return rows.hasNext();
                }

                @Override
                public InternalRow next() {
                    InternalRow row = rows.next();
                    UnsafeRow key = projections[turn].apply(row);
                    if (previous != null && ordering.compare(previous, key) > 0) {
                        throw disorder(bucket, count);
                    }
                    previous = key;
                    turn = 1 - turn;
                    count++;
                    return row;
                }
            };
        }

        private IllegalStateException disorder(int bucket, long count) {
            return new IllegalStateException("colocate: table " + table + " bucket " + bucket
                    + " is not in (" + keyNames + ") order at its row " + (count + 1)
                    + ": its replica's files were not written sorted by the bucket key, and a merge "
                    + "join over them would miss rows, so the query stops instead of returning wrong "
                    + "rows; set spark.colocate.sortedScan=false to have Spark sort them, and rewrite "
                    + "the partition");
        }
    }

    /**
     * The previous row's keys as longs, for keys that are input columns of integral types sorted
     * ascending with nulls first (the only order the rule asks this node to keep; anything else
     * takes the projection path).
     */
    static final class Primitive {
        private final int[] ordinals;
        private final int[] kinds;
        private final long[] previous;
        private final boolean[] previousNull;
        private boolean first = true;

        private static final int LONG = 0;
        private static final int INT = 1;
        private static final int SHORT = 2;
        private static final int BYTE = 3;

        private Primitive(int[] ordinals, int[] kinds) {
            this.ordinals = ordinals;
            this.kinds = kinds;
            this.previous = new long[ordinals.length];
            this.previousNull = new boolean[ordinals.length];
        }

        static Primitive of(Seq<Expression> keys, Seq<Attribute> input, Seq<SortOrder> bound) {
            List<Expression> ks = CollectionConverters.asJava(keys);
            List<Attribute> in = CollectionConverters.asJava(input);
            List<SortOrder> orders = CollectionConverters.asJava(bound);
            int[] ordinals = new int[ks.size()];
            int[] kinds = new int[ks.size()];
            for (int k = 0; k < ks.size(); k++) {
                SortOrder order = orders.get(k);
                if (!order.isAscending() || order.nullOrdering() != org.apache.spark.sql.catalyst.expressions.NullsFirst$.MODULE$) {
                    return null;
                }
                if (!(ks.get(k) instanceof Attribute)) {
                    return null;
                }
                Attribute key = (Attribute) ks.get(k);
                int ordinal = -1;
                for (int j = 0; j < in.size(); j++) {
                    if (in.get(j).exprId().equals(key.exprId())) {
                        ordinal = j;
                        break;
                    }
                }
                DataType type = key.dataType();
                if (ordinal < 0) {
                    return null;
                } else if (type == LongType$.MODULE$ || type == TimestampType$.MODULE$ || type == TimestampNTZType$.MODULE$) {
                    kinds[k] = LONG;
                } else if (type == IntegerType$.MODULE$ || type == DateType$.MODULE$) {
                    kinds[k] = INT;
                } else if (type == ShortType$.MODULE$) {
                    kinds[k] = SHORT;
                } else if (type == ByteType$.MODULE$) {
                    kinds[k] = BYTE;
                } else {
                    return null;
                }
                ordinals[k] = ordinal;
            }
            return new Primitive(ordinals, kinds);
        }

        private long value(InternalRow row, int k) {
            int ordinal = ordinals[k];
            switch (kinds[k]) {
                case LONG: return row.getLong(ordinal);
                case INT: return row.getInt(ordinal);
                case SHORT: return row.getShort(ordinal);
                default: return row.getByte(ordinal);
            }
        }

        /** Take ``row``'s keys as the previous; false when they sort before the previous row's. */
        boolean advance(InternalRow row) {
            boolean inOrder = true;
            boolean decided = first;
            for (int k = 0; k < ordinals.length; k++) {
                boolean isNull = row.isNullAt(ordinals[k]);
                long v = isNull ? 0L : value(row, k);
                if (!decided) {
                    if (previousNull[k] != isNull) {
                        inOrder = !isNull;  // nulls first: a null after a value is disorder
                        decided = true;
                    } else if (!isNull && previous[k] != v) {
                        inOrder = previous[k] < v;
                        decided = true;
                    }
                }
                previous[k] = v;
                previousNull[k] = isNull;
            }
            first = false;
            return inOrder;
        }
    }
}
