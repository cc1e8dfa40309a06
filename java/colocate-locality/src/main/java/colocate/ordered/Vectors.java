package colocate.ordered;

import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The typed loops of the columnar merge join: compare two keys, copy picked rows of a column.
 *
 * <p>Each column's type is resolved once (to a small code) on the driver, so the executor's
 * loops switch on an int per column and batch rather than per value on a DataType.
 */
final class Vectors {
    static final int BOOLEAN = 0, BYTE = 1, SHORT = 2, INT = 3, LONG = 4, FLOAT = 5, DOUBLE = 6, STRING = 7,
            BINARY = 8, DECIMAL_INT = 9, DECIMAL_LONG = 10, DECIMAL = 11;

    private Vectors() {
    }

    /** The code of a column type the join can copy, or -1 (the rule then keeps Spark's join). */
    static int code(DataType t) {
        if (t instanceof BooleanType) return BOOLEAN;
        if (t instanceof ByteType) return BYTE;
        if (t instanceof ShortType) return SHORT;
        if (t instanceof IntegerType || t instanceof DateType) return INT;
        if (t instanceof LongType || t instanceof TimestampType || t instanceof TimestampNTZType) return LONG;
        if (t instanceof FloatType) return FLOAT;
        if (t instanceof DoubleType) return DOUBLE;
        if (t instanceof StringType) return ((StringType) t).supportsBinaryOrdering() ? STRING : -1;
        if (t instanceof BinaryType) return BINARY;
        if (t instanceof DecimalType) {
            int p = ((DecimalType) t).precision();
            return p <= 9 ? DECIMAL_INT : p <= 18 ? DECIMAL_LONG : DECIMAL;
        }
        return -1;
    }

    /** A key type the join merges on (the list: integral, date, timestamp, string, decimal). */
    static boolean isKey(int code) {
        return code == BYTE || code == SHORT || code == INT || code == LONG || code == STRING
                || code == DECIMAL_INT || code == DECIMAL_LONG || code == DECIMAL;
    }

    /** Ascending comparison of two non-null values of one key type. */
    static int compare(int code, int precision, int scale, ColumnVector a, int i, ColumnVector b, int j) {
        switch (code) {
            case BYTE: return Byte.compare(a.getByte(i), b.getByte(j));
            case SHORT: return Short.compare(a.getShort(i), b.getShort(j));
            case INT:
            case DECIMAL_INT: return Integer.compare(a.getInt(i), b.getInt(j));
            case LONG:
            case DECIMAL_LONG: return Long.compare(a.getLong(i), b.getLong(j));
            case STRING: return a.getUTF8String(i).binaryCompare(b.getUTF8String(j));
            case DECIMAL: return a.getDecimal(i, precision, scale).compare(b.getDecimal(j, precision, scale));
            default: throw new IllegalStateException("colocate: columnar merge join: no comparison for type code " + code);
        }
    }

    /**
     * Rows {@code 0..count)} of a non-null integral key column as longs into {@code out}: one loop
     * per batch, so the merge then compares array entries rather than calling the vector per row.
     */
    static void longs(ColumnVector v, boolean ints, int count, long[] out) {
        if (v instanceof PickedVector) {
            ((PickedVector) v).longsInto(ints, count, out);
        } else if (ints) {
            for (int i = 0; i < count; i++) {
                out[i] = v.getInt(i);
            }
        } else {
            for (int i = 0; i < count; i++) {
                out[i] = v.getLong(i);
            }
        }
    }

    /** Whether rows {@code 0..count)} of a non-null integral column all hold the value of row 0. */
    static boolean uniform(ColumnVector v, boolean ints, int count) {
        if (ints) {
            int first = v.getInt(0);
            for (int i = 1; i < count; i++) {
                if (v.getInt(i) != first) {
                    return false;
                }
            }
        } else {
            long first = v.getLong(0);
            for (int i = 1; i < count; i++) {
                if (v.getLong(i) != first) {
                    return false;
                }
            }
        }
        return true;
    }

    /**
     * Copies {@code src}'s rows {@code rows[from..to)} (a negative row: null) to {@code dst}
     * from row {@code at}; {@code src} null means every row is null (the missing side of an
     * outer join's row).
     */
    static void gather(int code, int precision, int scale, ColumnVector src, int[] rows, int from, int to,
                       WritableColumnVector dst, int at) {
        dst.reserve(at + to - from);
        if (src == null) {
            dst.putNulls(at, to - from);
            return;
        }
        boolean nulls = src.hasNull();
        for (int k = from; k < to; k++, at++) {
            int i = rows == null ? k : rows[k];
            if (i < 0 || (nulls && src.isNullAt(i))) {
                dst.putNull(at);
                continue;
            }
            switch (code) {
                case BOOLEAN: dst.putBoolean(at, src.getBoolean(i)); break;
                case BYTE: dst.putByte(at, src.getByte(i)); break;
                case SHORT: dst.putShort(at, src.getShort(i)); break;
                case INT:
                case DECIMAL_INT: dst.putInt(at, src.getInt(i)); break;
                case LONG:
                case DECIMAL_LONG: dst.putLong(at, src.getLong(i)); break;
                case FLOAT: dst.putFloat(at, src.getFloat(i)); break;
                case DOUBLE: dst.putDouble(at, src.getDouble(i)); break;
                case STRING: {
                    UTF8String s = src.getUTF8String(i);
                    Object base = s.getBaseObject();
                    if (base instanceof byte[]) {
                        dst.putByteArray(at, (byte[]) base, (int) (s.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET), s.numBytes());
                    } else {
                        byte[] bytes = s.getBytes();
                        dst.putByteArray(at, bytes, 0, bytes.length);
                    }
                    break;
                }
                case BINARY: {
                    byte[] bytes = src.getBinary(i);
                    dst.putByteArray(at, bytes, 0, bytes.length);
                    break;
                }
                case DECIMAL: dst.putDecimal(at, src.getDecimal(i, precision, scale), precision); break;
                default: throw new IllegalStateException("colocate: columnar merge join: no copy for type code " + code);
            }
        }
    }
}
