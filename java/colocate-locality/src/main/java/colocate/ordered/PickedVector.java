package colocate.ordered;

import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * An output column of the columnar merge join that copies nothing: row {@code i} is row
 * {@code rows[i]} of an input vector ({@code -1}: null, the missing side of an outer join's row).
 *
 * <p>Why: copying the joined values into fresh vectors was the join's own largest cost on TPC-H
 * (every lineitem row's price and discount, every order's priority string repeated per line), and
 * the row operator above reads each value once anyway. It is valid only while the input batch it
 * picks from is: {@link ColumnarMerge} ends an output batch before either input moves on, and the
 * consumer reads a batch before asking for the next one (the same contract as a scan's reused
 * vectors).
 */
final class PickedVector extends ColumnVector {
    private ColumnVector src;    // null: every picked row is -1
    private int[] rows;
    private int n;
    private boolean minus;       // some row is -1
    private int nulls = -1;      // counted on demand
    // the last string read: a one-row side's row repeats for each of its matches (an order's
    // priority for each of its lines), and a UTF8String is immutable, so it is made once
    private int lastRow = -1;
    private UTF8String lastString;

    PickedVector(DataType type) {
        super(type);
    }

    void point(ColumnVector src, int[] rows, int n, boolean minus) {
        this.src = src;
        this.rows = rows;
        this.n = n;
        this.minus = minus || src == null;
        this.nulls = -1;
        this.lastRow = -1;
        this.lastString = null;
    }

    /** Whether every picked row holds one value: all picked from a constant (partition) column. */
    boolean constant() {
        return !minus && src instanceof ConstantColumnVector;
    }

    /** The picked rows' values of an integral column as longs into {@code out} (no row is -1: a key's). */
    void longsInto(boolean ints, int count, long[] out) {
        if (minus) {  // a -1 row (an outer join's null side) has no value: the merge must take its general path
            throw new IllegalStateException("longsInto on a picked vector with null-side rows");
        }
        ColumnVector v = src;
        int[] r = rows;
        if (ints) {
            for (int i = 0; i < count; i++) {
                out[i] = v.getInt(r[i]);
            }
        } else {
            for (int i = 0; i < count; i++) {
                out[i] = v.getLong(r[i]);
            }
        }
    }

    @Override
    public void close() {
        // the picked vectors belong to the scans
    }

    @Override
    public boolean hasNull() {
        return minus || src.hasNull();  // may say true with no null picked: readers then check per row
    }

    @Override
    public int numNulls() {
        if (nulls < 0) {
            int k = 0;
            for (int i = 0; i < n; i++) {
                k += isNullAt(i) ? 1 : 0;
            }
            nulls = k;
        }
        return nulls;
    }

    @Override
    public boolean isNullAt(int rowId) {
        int r = rows[rowId];
        return r < 0 || src.isNullAt(r);
    }

    @Override
    public boolean getBoolean(int rowId) {
        int r = rows[rowId];
        return r >= 0 && src.getBoolean(r);
    }

    @Override
    public byte getByte(int rowId) {
        int r = rows[rowId];
        return r < 0 ? 0 : src.getByte(r);
    }

    @Override
    public short getShort(int rowId) {
        int r = rows[rowId];
        return r < 0 ? 0 : src.getShort(r);
    }

    @Override
    public int getInt(int rowId) {
        int r = rows[rowId];
        return r < 0 ? 0 : src.getInt(r);
    }

    @Override
    public long getLong(int rowId) {
        int r = rows[rowId];
        return r < 0 ? 0L : src.getLong(r);
    }

    @Override
    public float getFloat(int rowId) {
        int r = rows[rowId];
        return r < 0 ? 0f : src.getFloat(r);
    }

    @Override
    public double getDouble(int rowId) {
        int r = rows[rowId];
        return r < 0 ? 0d : src.getDouble(r);
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        int r = rows[rowId];
        return r < 0 ? null : src.getDecimal(r, precision, scale);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        int r = rows[rowId];
        if (r < 0) {
            return null;
        }
        if (r != lastRow) {
            lastString = src.getUTF8String(r);
            lastRow = r;
        }
        return lastString;
    }

    @Override
    public byte[] getBinary(int rowId) {
        int r = rows[rowId];
        return r < 0 ? null : src.getBinary(r);
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        throw new UnsupportedOperationException("colocate: the columnar merge join outputs atomic columns only");
    }

    @Override
    public ColumnarMap getMap(int ordinal) {
        throw new UnsupportedOperationException("colocate: the columnar merge join outputs atomic columns only");
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw new UnsupportedOperationException("colocate: the columnar merge join outputs atomic columns only");
    }
}
