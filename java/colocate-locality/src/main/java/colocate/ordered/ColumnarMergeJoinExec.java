package colocate.ordered;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.JoinType;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Option;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * A colocated bucket's merge join that works on column batches: put by {@link ColumnarJoinRule}
 * where Spark planned a sort-merge join over two ordered bucket reads (or over such joins), it
 * consumes the reads' batches directly and produces batches; Spark turns them into rows only
 * where a row operator reads them.
 *
 * <p>The filters and renames Spark had between its join and each read (the view's bucket guard,
 * pushed-down conditions) are applied here to the batches ({@code leftFilter}, {@code rightFilter});
 * the keys, the condition and the output are in the reads' own columns. {@code leftTable} and
 * {@code rightTable} name the tables whose order the merge checks ("" for a join's output).
 */
public final class ColumnarMergeJoinExec extends SparkPlan {
    public static final String NODE_NAME = "ColocateColumnarMergeJoin";

    private final Seq<Expression> leftKeys;
    private final Seq<Expression> rightKeys;
    private final JoinType joinType;
    private final Option<Expression> condition;
    private final Option<Expression> leftFilter;
    private final Option<Expression> rightFilter;
    private final Seq<Attribute> output;
    private final Partitioning partitioning;
    private final Seq<SortOrder> ordering;
    private final String leftTable;
    private final String rightTable;
    private final SparkPlan left;
    private final SparkPlan right;

    public ColumnarMergeJoinExec(Seq<Expression> leftKeys, Seq<Expression> rightKeys, JoinType joinType,
                                 Option<Expression> condition, Option<Expression> leftFilter,
                                 Option<Expression> rightFilter, Seq<Attribute> output, Partitioning partitioning,
                                 Seq<SortOrder> ordering, String leftTable, String rightTable, SparkPlan left,
                                 SparkPlan right) {
        this.leftKeys = leftKeys;
        this.rightKeys = rightKeys;
        this.joinType = joinType;
        this.condition = condition;
        this.leftFilter = leftFilter;
        this.rightFilter = rightFilter;
        this.output = output;
        this.partitioning = partitioning;
        this.ordering = ordering;
        this.leftTable = leftTable;
        this.rightTable = rightTable;
        this.left = left;
        this.right = right;
    }

    public Seq<Expression> leftKeys() {
        return leftKeys;
    }

    public Seq<Expression> rightKeys() {
        return rightKeys;
    }

    public JoinType joinType() {
        return joinType;
    }

    public Option<Expression> condition() {
        return condition;
    }

    public SparkPlan left() {
        return left;
    }

    public SparkPlan right() {
        return right;
    }

    @Override
    public Seq<Attribute> output() {
        return output;
    }

    @Override
    public Partitioning outputPartitioning() {
        return partitioning;
    }

    @Override
    public Seq<SortOrder> outputOrdering() {
        return ordering;
    }

    @Override
    public Seq<SparkPlan> children() {
        return CollectionConverters.asScala(List.of(left, right)).toList();
    }

    @Override
    public SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> newChildren) {
        return new ColumnarMergeJoinExec(leftKeys, rightKeys, joinType, condition, leftFilter, rightFilter, output,
                partitioning, ordering, leftTable, rightTable, newChildren.apply(0), newChildren.apply(1));
    }

    /**
     * This join with no output column, for a parent that reads none (count(*) over it): its
     * batches carry the row count only, so the merge records no row numbers and ColumnarToRow
     * reads no value. Its rows have no columns, so it promises no partitioning or order of them.
     */
    ColumnarMergeJoinExec counting() {
        return new ColumnarMergeJoinExec(leftKeys, rightKeys, joinType, condition, leftFilter, rightFilter,
                CollectionConverters.asScala(new ArrayList<Attribute>()).toList(),
                new UnknownPartitioning(partitioning.numPartitions()),
                CollectionConverters.asScala(new ArrayList<SortOrder>()).toList(), leftTable, rightTable, left, right);
    }

    @Override
    public String nodeName() {
        return NODE_NAME;
    }

    private static String seq(Seq<?> s) {
        List<String> parts = new ArrayList<>();
        for (Object o : CollectionConverters.asJava(s)) {
            parts.add(String.valueOf(o));
        }
        return "[" + String.join(", ", parts) + "]";
    }

    private String orderedRead(String table, Seq<Expression> keys) {
        // The same words as AssertOrderedExec's node, so the plan still counts its ordered reads.
        return table.isEmpty() ? "" : ", " + AssertOrderedExec.NODE_NAME + " " + seq(keys) + " " + table;
    }

    /** Spark's join line ({@code Name [left keys], [right keys], JoinType, condition}) and what it reads. */
    @Override
    public String simpleString(int maxFields) {
        return NODE_NAME + " " + seq(leftKeys) + ", " + seq(rightKeys) + ", " + joinType + ", "
                + (condition.isDefined() ? condition.get().toString() : "None")
                + ", column batches" + orderedRead(leftTable, leftKeys) + orderedRead(rightTable, rightKeys)
                + (leftFilter.isDefined() || rightFilter.isDefined() ? ", filters: bucket guard and pushed conditions" : "")
                + (output.isEmpty() ? ", no output column (rows counted)" : "");
    }

    @Override
    public String verboseString(int maxFields) {
        return simpleString(maxFields);
    }

    @Override
    public boolean supportsColumnar() {
        return true;
    }

    @Override
    public RDD<InternalRow> doExecute() {
        throw new IllegalStateException("colocate: " + NODE_NAME + " produces column batches only");
    }

    private static int[] ordinals(Seq<Expression> keys, List<Attribute> input) {
        List<Expression> k = CollectionConverters.asJava(keys);
        int[] out = new int[k.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = indexOf(input, (Attribute) k.get(i));
        }
        return out;
    }

    static int indexOf(List<Attribute> input, Attribute a) {
        for (int i = 0; i < input.size(); i++) {
            if (input.get(i).exprId().equals(a.exprId())) {
                return i;
            }
        }
        throw new IllegalStateException("colocate: " + NODE_NAME + ": " + a + " is not among its input " + input);
    }

    private ColumnarMerge.Side side(SparkPlan child, Seq<Expression> keys, Option<Expression> filter, String table,
                                    java.util.Set<Integer> needed) {
        List<Attribute> input = CollectionConverters.asJava(child.output());
        int n = input.size();
        int[] codes = new int[n], precisions = new int[n], scales = new int[n];
        org.apache.spark.sql.types.DataType[] types = new org.apache.spark.sql.types.DataType[n];
        for (int i = 0; i < n; i++) {
            types[i] = input.get(i).dataType();
            codes[i] = Vectors.code(types[i]);
            if (types[i] instanceof org.apache.spark.sql.types.DecimalType) {
                precisions[i] = ((org.apache.spark.sql.types.DecimalType) types[i]).precision();
                scales[i] = ((org.apache.spark.sql.types.DecimalType) types[i]).scale();
            }
        }
        int[] keyOrdinals = ordinals(keys, input);
        for (int k : keyOrdinals) {
            needed.add(k);
        }
        int[] need = needed.stream().mapToInt(Integer::intValue).sorted().toArray();
        List<String> names = new ArrayList<>();
        for (Expression k : CollectionConverters.asJava(keys)) {
            names.add(((Attribute) k).name());
        }
        // The filters: non-null columns and the bucket guard on the vectors, the rest per row.
        List<Expression> conjuncts = new ArrayList<>();
        if (filter.isDefined()) {
            split(filter.get(), conjuncts);
        }
        List<Integer> notNull = new ArrayList<>();
        BucketGuard guard = null;
        Expression rest = null;
        for (Expression c : conjuncts) {
            if (c instanceof IsNotNull && ((IsNotNull) c).child() instanceof Attribute) {
                notNull.add(indexOf(input, (Attribute) ((IsNotNull) c).child()));
                continue;
            }
            BucketGuard g = guard == null ? BucketGuard.of(c, input) : null;
            if (g != null) {
                guard = g;
                continue;
            }
            rest = rest == null ? c : new And(rest, c);
        }
        ColumnarMerge.Side side = new ColumnarMerge.Side(child.output(), rest, keyOrdinals, need, codes, precisions,
                scales, types, table.isEmpty() ? null : table, String.join(", ", names));
        side.notNull = notNull.stream().mapToInt(Integer::intValue).toArray();
        side.guard = guard;
        return side;
    }

    private static void split(Expression e, List<Expression> into) {
        if (e instanceof And) {
            split(((And) e).left(), into);
            split(((And) e).right(), into);
        } else {
            into.add(e);
        }
    }

    static int typeCode(JoinType t) {
        switch (t.toString()) {
            case "Inner": return ColumnarMerge.INNER;
            case "LeftOuter": return ColumnarMerge.LEFT_OUTER;
            case "RightOuter": return ColumnarMerge.RIGHT_OUTER;
            case "LeftSemi": return ColumnarMerge.LEFT_SEMI;
            case "LeftAnti": return ColumnarMerge.LEFT_ANTI;
            default: return -1;
        }
    }

    private static void referencedIn(Expression e, List<Attribute> input, java.util.Set<Integer> into) {
        for (Attribute a : CollectionConverters.asJava(e.references().toSeq())) {
            for (int i = 0; i < input.size(); i++) {
                if (input.get(i).exprId().equals(a.exprId())) {
                    into.add(i);
                }
            }
        }
    }

    @Override
    public RDD<ColumnarBatch> doExecuteColumnar() {
        List<Attribute> lin = CollectionConverters.asJava(left.output());
        List<Attribute> rin = CollectionConverters.asJava(right.output());
        java.util.Set<Integer> lneed = new java.util.TreeSet<>(), rneed = new java.util.TreeSet<>();
        List<Attribute> out = CollectionConverters.asJava(output);
        int[] outSide = new int[out.size()], outOrdinal = new int[out.size()];
        org.apache.spark.sql.types.DataType[] outTypes = new org.apache.spark.sql.types.DataType[out.size()];
        for (int c = 0; c < out.size(); c++) {
            Attribute a = out.get(c);
            boolean inLeft = lin.stream().anyMatch(x -> x.exprId().equals(a.exprId()));
            outSide[c] = inLeft ? 0 : 1;
            outOrdinal[c] = indexOf(inLeft ? lin : rin, a);
            outTypes[c] = a.dataType();
            (inLeft ? lneed : rneed).add(outOrdinal[c]);
        }
        List<Attribute> both = new ArrayList<>(lin);
        both.addAll(rin);
        if (condition.isDefined()) {
            referencedIn(condition.get(), lin, lneed);
            referencedIn(condition.get(), rin, rneed);
        }
        ColumnarMerge merge = new ColumnarMerge(typeCode(joinType), side(left, leftKeys, leftFilter, leftTable, lneed),
                side(right, rightKeys, rightFilter, rightTable, rneed), condition.isDefined() ? condition.get() : null,
                CollectionConverters.asScala(both).toList(), outSide, outOrdinal, outTypes,
                Math.max(1, Integer.parseInt(conf().getConfString(ColumnarMerge.BATCH_ROWS, "4096").trim())));
        RDD<ColumnarBatch> l = left.executeColumnar();
        RDD<ColumnarBatch> r = right.executeColumnar();
        return l.zipPartitions(r, true, merge, ClassTag$.MODULE$.apply(ColumnarBatch.class),
                ClassTag$.MODULE$.apply(ColumnarBatch.class));
    }

    @Override
    public int productArity() {
        return 13;
    }

    @Override
    public Object productElement(int n) {
        switch (n) {
            case 0: return leftKeys;
            case 1: return rightKeys;
            case 2: return joinType;
            case 3: return condition;
            case 4: return leftFilter;
            case 5: return rightFilter;
            case 6: return output;
            case 7: return partitioning;
            case 8: return ordering;
            case 9: return leftTable;
            case 10: return rightTable;
            case 11: return left;
            case 12: return right;
            default: throw new IndexOutOfBoundsException(String.valueOf(n));
        }
    }

    @Override
    public boolean canEqual(Object that) {
        return that instanceof ColumnarMergeJoinExec;
    }

    @Override
    public boolean equals(Object that) {
        if (!(that instanceof ColumnarMergeJoinExec)) {
            return false;
        }
        ColumnarMergeJoinExec o = (ColumnarMergeJoinExec) that;
        for (int i = 0; i < productArity(); i++) {
            if (!Objects.equals(productElement(i), o.productElement(i))) {
                return false;
            }
        }
        return true;
    }

    @Override
    public int hashCode() {
        return Objects.hash(leftKeys, rightKeys, joinType, condition, leftFilter, rightFilter, output, left, right);
    }
}
