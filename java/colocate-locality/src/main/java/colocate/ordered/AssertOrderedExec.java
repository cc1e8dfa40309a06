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
 * and bucket. It compares the keys only, kept by two projections used in turn, so no row is
 * copied.
 */
public final class AssertOrderedExec extends SparkPlan {
    static final String NODE_NAME = "ColocateOrderedBucket";
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
        return NODE_NAME;
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
            UnsafeProjection[] projections = {UnsafeProjection.create(keys, input), UnsafeProjection.create(keys, input)};
            BaseOrdering ordering = (BaseOrdering) GenerateOrdering.generate(bound);
            int bucket = TaskContext.getPartitionId();
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
                        throw new IllegalStateException("colocate: table " + table + " bucket " + bucket
                                + " is not in (" + keyNames + ") order at its row " + (count + 1)
                                + ": its replica's files were not written sorted by the bucket key, and a merge "
                                + "join over them would miss rows, so the query stops instead of returning wrong "
                                + "rows; set spark.colocate.sortedScan=false to have Spark sort them, and rewrite "
                                + "the partition");
                    }
                    previous = key;
                    turn = 1 - turn;
                    count++;
                    return row;
                }
            };
        }
    }
}
