package colocate.ordered;

import java.io.Serializable;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.CaseWhen;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Murmur3Hash;
import org.apache.spark.sql.catalyst.expressions.Pmod;
import org.apache.spark.sql.catalyst.expressions.Predicate;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatchRow;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The view's bucket guard ({@code CASE WHEN pmod(hash(keys), n) = __bucket THEN true ELSE
 * raise_error(...) END}, airflow_colocate/spark/register.py) computed on a batch's vectors: Spark's
 * Murmur3 hash of the keys, a column at a time. A row whose bucket differs is handed to Spark's
 * own guard expression, which stops the query with the guard's one line (table, partition, bucket,
 * which the join job completes with the replica); should Spark's expression accept the row after
 * all, the row is kept, so the guard never says less than Spark's.
 */
final class BucketGuard implements Serializable {
    private final Expression expression;
    private final int[] keys;
    private final int[] codes;
    private final int[] precisions;
    private final int bucketColumn;
    private final int buckets;
    private final int seed;
    private transient BasePredicate spark;
    private transient int[] hashes;
    private static final java.util.concurrent.atomic.AtomicLong DISAGREEMENTS = new java.util.concurrent.atomic.AtomicLong();

    /** Rows this JVM's vector guard took for another bucket's and Spark's guard accepted (a bug if ever above 0). */
    public static long disagreements() {
        return DISAGREEMENTS.get();
    }

    private BucketGuard(Expression expression, int[] keys, int[] codes, int[] precisions, int bucketColumn,
                        int buckets, int seed) {
        this.expression = expression;
        this.keys = keys;
        this.codes = codes;
        this.precisions = precisions;
        this.bucketColumn = bucketColumn;
        this.buckets = buckets;
        this.seed = seed;
    }

    /** The guard computed on vectors, when {@code e} is the view's guard over {@code input}'s columns; else null. */
    static BucketGuard of(Expression e, List<Attribute> input) {
        if (!(e instanceof CaseWhen)) {
            return null;
        }
        CaseWhen cw = (CaseWhen) e;
        List<Tuple2<Expression, Expression>> branches = CollectionConverters.asJava(cw.branches());
        if (branches.size() != 1 || !(branches.get(0)._2() instanceof Literal)
                || !Boolean.TRUE.equals(((Literal) branches.get(0)._2()).value())
                || !(branches.get(0)._1() instanceof EqualTo)) {
            return null;
        }
        EqualTo eq = (EqualTo) branches.get(0)._1();
        if (!(eq.left() instanceof Pmod) || !(eq.right() instanceof Attribute)
                || !(eq.right().dataType() instanceof IntegerType)) {
            return null;
        }
        Pmod pmod = (Pmod) eq.left();
        if (!(pmod.left() instanceof Murmur3Hash) || !(pmod.right() instanceof Literal)
                || !(pmod.right().dataType() instanceof IntegerType)) {
            return null;
        }
        Murmur3Hash hash = (Murmur3Hash) pmod.left();
        List<Expression> cols = CollectionConverters.asJava(hash.children());
        int[] keys = new int[cols.size()], codes = new int[cols.size()], precisions = new int[cols.size()];
        for (int i = 0; i < keys.length; i++) {
            Expression c = cols.get(i);
            int code = Vectors.code(c.dataType());
            if (!(c instanceof Attribute) || !(code == Vectors.INT || code == Vectors.LONG || code == Vectors.STRING
                    || code == Vectors.DECIMAL_INT || code == Vectors.DECIMAL_LONG || code == Vectors.BYTE
                    || code == Vectors.SHORT)) {
                return null;
            }
            keys[i] = position(input, (Attribute) c);
            codes[i] = code;
            precisions[i] = code == Vectors.DECIMAL_INT || code == Vectors.DECIMAL_LONG
                    ? ((org.apache.spark.sql.types.DecimalType) c.dataType()).precision() : 0;
            if (keys[i] < 0) {
                return null;
            }
        }
        int bucket = position(input, (Attribute) eq.right());
        if (bucket < 0 || !(e.dataType() instanceof BooleanType)) {
            return null;
        }
        return new BucketGuard(e, keys, codes, precisions, bucket, (Integer) ((Literal) pmod.right()).value(),
                hash.seed());
    }

    private static int position(List<Attribute> input, Attribute a) {
        for (int i = 0; i < input.size(); i++) {
            if (input.get(i).exprId().equals(a.exprId())) {
                return i;
            }
        }
        return -1;
    }

    /** Checks rows {@code sel[0..n)}: a row of another bucket stops the query through Spark's guard. */
    void check(ColumnVector[] cols, int[] sel, int n, Seq<Attribute> input) {
        if (hashes == null || hashes.length < n) {
            hashes = new int[Math.max(n, 1024)];
        }
        java.util.Arrays.fill(hashes, 0, n, seed);
        for (int k = 0; k < keys.length; k++) {
            ColumnVector v = cols[keys[k]];
            boolean nulls = v.hasNull();
            int code = codes[k];
            if (!nulls && (code == Vectors.LONG || code == Vectors.DECIMAL_LONG)) {
                for (int x = 0; x < n; x++) { // the common key (a bigint id): one call a row, no switch
                    hashes[x] = Murmur3_x86_32.hashLong(v.getLong(sel[x]), hashes[x]);
                }
                continue;
            }
            if (!nulls && code == Vectors.INT) {
                for (int x = 0; x < n; x++) {
                    hashes[x] = Murmur3_x86_32.hashInt(v.getInt(sel[x]), hashes[x]);
                }
                continue;
            }
            for (int x = 0; x < n; x++) {
                int i = sel[x];
                if (nulls && v.isNullAt(i)) {
                    continue; // Spark's hash leaves the seed as it is for a null
                }
                int h = hashes[x];
                switch (code) {
                    case Vectors.BYTE: h = Murmur3_x86_32.hashInt(v.getByte(i), h); break;
                    case Vectors.SHORT: h = Murmur3_x86_32.hashInt(v.getShort(i), h); break;
                    case Vectors.INT: h = Murmur3_x86_32.hashInt(v.getInt(i), h); break;
                    case Vectors.LONG: h = Murmur3_x86_32.hashLong(v.getLong(i), h); break;
                    case Vectors.DECIMAL_INT: h = Murmur3_x86_32.hashLong(v.getInt(i), h); break;
                    case Vectors.DECIMAL_LONG: h = Murmur3_x86_32.hashLong(v.getLong(i), h); break;
                    default: {
                        UTF8String s = v.getUTF8String(i);
                        h = Murmur3_x86_32.hashUnsafeBytes(s.getBaseObject(), s.getBaseOffset(), s.numBytes(), h);
                    }
                }
                hashes[x] = h;
            }
        }
        ColumnVector bucket = cols[bucketColumn];
        // A bucket's files hold one bucket (a partition value: one constant), and a power-of-two
        // bucket count takes pmod as a mask: the row's check is then an AND and a compare.
        boolean constant = bucket instanceof ConstantColumnVector && !bucket.isNullAt(0);
        int want = constant ? bucket.getInt(0) : -1;
        int mask = Integer.bitCount(buckets) == 1 ? buckets - 1 : -1;
        for (int x = 0; x < n; x++) {
            int h;
            if (mask >= 0) {
                h = hashes[x] & mask;
            } else {
                h = hashes[x] % buckets;
                if (h < 0) {
                    h += buckets;
                }
            }
            if (h != (constant ? want : bucket.getInt(sel[x]))) {
                if (spark == null) {
                    spark = Predicate.create(expression, input);
                    spark.initialize(0);
                }
                ColumnarBatchRow row = new ColumnarBatchRow(cols);
                row.rowId = sel[x];
                spark.eval(row); // raises the guard's error for a row of another bucket
                DISAGREEMENTS.incrementAndGet();
            }
        }
    }
}
