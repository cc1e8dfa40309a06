package colocate.ordered;

import java.io.Serializable;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.Predicate;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.sql.vectorized.ColumnarBatchRow;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractFunction2;

/**
 * The executor side of {@link ColumnarMergeJoinExec}: merges one bucket's two key-ordered column
 * batch streams into batches of joined rows.
 *
 * <p>Each side is read run by run (the rows of one key). A run inside one input batch is named by
 * its row numbers and never copied; only a run that reaches the end of a batch is copied into a
 * small carry buffer, because the scan refills its vectors with the next batch. The output is
 * written a column at a time from the pairs of row numbers a key's runs produce. A row whose key
 * has a null never matches. Every side that is a table's read is checked to be in key order as
 * it is merged, as {@link AssertOrderedExec} checks it for Spark's join: the query stops at the
 * first row out of order instead of missing its matches.
 */
final class ColumnarMerge extends AbstractFunction2<Iterator<ColumnarBatch>, Iterator<ColumnarBatch>, Iterator<ColumnarBatch>>
        implements Serializable {
    static final int INNER = 0, LEFT_OUTER = 1, RIGHT_OUTER = 2, LEFT_SEMI = 3, LEFT_ANTI = 4;
    /** Rows an output batch holds (spark.colocate.join.columnar.batchRows; tests make it tiny). */
    static final String BATCH_ROWS = "spark.colocate.join.columnar.batchRows";

    /** What the merge needs to know of one side, resolved on the driver. */
    static final class Side implements Serializable {
        final Seq<Attribute> input;     // the child's output, in its batches' column order
        final Expression filter;        // null: every row
        final int[] keys;               // ordinals of the join keys in input
        final int[] needed;             // ordinals copied into the carry (keys, output, condition)
        final int[] codes, precisions, scales; // per input ordinal (-1 where not needed)
        final DataType[] types;
        final String table;             // the table a read comes from; null for a join's output
        final String keyNames;
        int[] notNull = new int[0];     // ordinals the filters require non-null (checked on the vectors)
        BucketGuard guard;              // the view's bucket guard, computed on the vectors; null: none

        Side(Seq<Attribute> input, Expression filter, int[] keys, int[] needed, int[] codes, int[] precisions,
             int[] scales, DataType[] types, String table, String keyNames) {
            this.input = input;
            this.filter = filter;
            this.keys = keys;
            this.needed = needed;
            this.codes = codes;
            this.precisions = precisions;
            this.scales = scales;
            this.types = types;
            this.table = table;
            this.keyNames = keyNames;
        }
    }

    private final int joinType;
    private final Side left;
    private final Side right;
    private final Expression condition;    // null: none
    private final Seq<Attribute> conditionInput;
    private final int[] outSide;            // 0 left, 1 right
    private final int[] outOrdinal;
    private final DataType[] outTypes;
    private final int batchRows;

    ColumnarMerge(int joinType, Side left, Side right, Expression condition, Seq<Attribute> conditionInput,
                  int[] outSide, int[] outOrdinal, DataType[] outTypes, int batchRows) {
        this.batchRows = batchRows;
        this.joinType = joinType;
        this.left = left;
        this.right = right;
        this.condition = condition;
        this.conditionInput = conditionInput;
        this.outSide = outSide;
        this.outOrdinal = outOrdinal;
        this.outTypes = outTypes;
    }

    @Override
    public Iterator<ColumnarBatch> apply(Iterator<ColumnarBatch> l, Iterator<ColumnarBatch> r) {
        return new Merge(l, r);
    }

    /** {@link #compareKeys} of two rows neither of which has a null key. */
    static int compareValues(Side a, ColumnVector[] ac, int i, Side b, ColumnVector[] bc, int j) {
        int[] ak = a.keys, bk = b.keys;
        for (int k = 0; k < ak.length; k++) {
            int o = ak[k];
            int c = Vectors.compare(a.codes[o], a.precisions[o], a.scales[o], ac[o], i, bc[bk[k]], j);
            if (c != 0) {
                return c;
            }
        }
        return 0;
    }

    static int compareKeys(Side a, ColumnVector[] ac, int i, Side b, ColumnVector[] bc, int j) {
        for (int k = 0; k < a.keys.length; k++) {
            ColumnVector x = ac[a.keys[k]];
            ColumnVector y = bc[b.keys[k]];
            boolean nx = x.isNullAt(i), ny = y.isNullAt(j);
            if (nx || ny) {
                if (nx && ny) {
                    continue;
                }
                return nx ? -1 : 1; // nulls first, as the reads are sorted
            }
            int o = a.keys[k];
            int c = Vectors.compare(a.codes[o], a.precisions[o], a.scales[o], x, i, y, j);
            if (c != 0) {
                return c;
            }
        }
        return 0;
    }

    /** One side's reader: its batches, the rows its filter keeps, and the current run of one key. */
    final class Cursor {
        private final Iterator<ColumnarBatch> in;
        private final Side side;
        private final BasePredicate filter;
        private final Merge owner;
        private final int bucket = TaskContext.getPartitionId();
        // per batch: whether a key column may hold nulls, which key columns vary (partition values do
        // not), and the one varying integral key the run search compares as a long (-1: none)
        private boolean keyNulls;
        private int[] varying = new int[0];
        private int fastKey = -1;
        private boolean fastInt;
        // the fast key's values of the whole batch as longs (read once per batch, so the run search
        // and the merge compare array entries, not a vector's virtual getter per row), its position
        // in the side's keys, and the batches loaded so far (the merge re-checks its fast compare per pair)
        long[] keyVals = new long[0];
        int fastPos = -1;
        int loads;
        ColumnVector[] cols;
        private int[] sel = new int[0];
        private boolean all;   // every row kept (no filter): sel unused
        private int selN;
        private int p;
        private long seen;     // kept rows of the batches before this one
        private final OnHeapColumnVector[] carry;
        private final ColumnVector[] carryCols;
        private int carryN;
        private boolean carryValid;
        // the current run
        ColumnVector[] runCols;
        int[] runRows;          // null: rows runFrom..runTo themselves
        int runFrom, runTo;
        boolean runNull;
        // runEnd(endFrom) of the current batch, found by advanceLoads before nextRun needs it (-1: none)
        private int endFrom = -1, endAt;

        Cursor(Iterator<ColumnarBatch> in, Side side, Merge owner) {
            this.in = in;
            this.side = side;
            this.owner = owner;
            if (side.filter != null) {
                filter = Predicate.create(side.filter, side.input);
                filter.initialize(bucket);
            } else {
                filter = null;
            }
            int n = side.types.length;
            carry = new OnHeapColumnVector[n];
            carryCols = new ColumnVector[n];
            for (int o : side.needed) {
                carry[o] = new OnHeapColumnVector(64, side.types[o]);
                carryCols[o] = carry[o];
            }
        }

        int row(int k) {
            return all ? k : sel[k];
        }

        int runRow(int k) {
            return runRows == null ? k : runRows[k];
        }

        int runSize() {
            return runTo - runFrom;
        }

        /** The next batch with a kept row; false at the end of the input. */
        private boolean load() {
            owner.flush();
            endFrom = -1;
            seen += selN;
            while (in.hasNext()) {
                ColumnarBatch b = in.next();
                int n = b.numRows();
                if (cols == null || cols.length != b.numCols()) {
                    cols = new ColumnVector[b.numCols()];
                }
                for (int c = 0; c < cols.length; c++) {
                    cols[c] = b.column(c);
                }
                select(n);
                p = 0;
                if (selN > 0) {
                    describeKeys(n);
                    return true;
                }
            }
            cols = null;
            selN = 0;
            p = 0;
            return false;
        }

        /** The rows the side's filters keep: non-null columns and the bucket guard on the vectors, the rest per row. */
        private void select(int n) {
            boolean nulls = false;
            for (int o : side.notNull) {
                nulls |= cols[o].hasNull();
            }
            if (filter == null && side.guard == null && !nulls) {
                all = true;
                selN = n;
                return;
            }
            all = false;
            if (sel.length < n) {
                sel = new int[n];
            }
            int k = 0;
            if (nulls) {
                for (int i = 0; i < n; i++) {
                    boolean keep = true;
                    for (int o : side.notNull) {
                        keep &= !cols[o].isNullAt(i);
                    }
                    if (keep) {
                        sel[k++] = i;
                    }
                }
            } else {
                for (int i = 0; i < n; i++) {
                    sel[k++] = i;
                }
            }
            if (side.guard != null) {
                side.guard.check(cols, sel, k, side.input);
            }
            if (filter != null) {
                ColumnarBatchRow view = new ColumnarBatchRow(cols);
                int kept = 0;
                for (int x = 0; x < k; x++) {
                    view.rowId = sel[x];
                    if (filter.eval(view)) {
                        sel[kept++] = sel[x];
                    }
                }
                k = kept;
            }
            selN = k;
        }

        private void describeKeys(int n) {
            keyNulls = false;
            int[] vary = new int[side.keys.length];
            int nv = 0;
            for (int o : side.keys) {
                keyNulls |= cols[o].hasNull();
                if (!constant(cols[o])) {
                    vary[nv++] = o;
                }
            }
            if (nv > 1 && !keyNulls) {
                // A scan fills its partition columns (dt) into plain vectors, one value repeated:
                // a key column that holds one value in this batch varies no more than a constant.
                int kept = 0;
                for (int i = 0; i < nv; i++) {
                    int o = vary[i];
                    int code = side.codes[o];
                    boolean integral = code == Vectors.LONG || code == Vectors.DECIMAL_LONG || code == Vectors.INT
                            || code == Vectors.DECIMAL_INT;
                    if (!integral || !Vectors.uniform(cols[o], code == Vectors.INT || code == Vectors.DECIMAL_INT, n)) {
                        vary[kept++] = o;
                    }
                }
                nv = kept;
            }
            varying = java.util.Arrays.copyOf(vary, nv);
            fastKey = -1;
            fastPos = -1;
            loads++;
            if (!keyNulls && nv == 1) {
                int code = side.codes[vary[0]];
                if (code == Vectors.LONG || code == Vectors.DECIMAL_LONG || code == Vectors.INT
                        || code == Vectors.DECIMAL_INT) {
                    fastKey = vary[0];
                    fastInt = code == Vectors.INT || code == Vectors.DECIMAL_INT;
                    for (int k = 0; k < side.keys.length; k++) {
                        if (side.keys[k] == fastKey) {
                            fastPos = k;
                        }
                    }
                    if (keyVals.length < n) {
                        keyVals = new long[Math.max(n, 2 * keyVals.length)];
                    }
                    Vectors.longs(cols[fastKey], fastInt, n, keyVals);
                }
            }
        }

        /** A column whose value is one for the whole batch: a partition column, or one picked from it. */
        private boolean constant(ColumnVector v) {
            return v instanceof ConstantColumnVector || (v instanceof PickedVector && ((PickedVector) v).constant());
        }

        /** Compares two rows of the current batch on the keys that vary in it. */
        private int compareInBatch(int i, int j) {
            if (keyNulls) {
                return compareKeys(side, cols, i, side, cols, j);
            }
            for (int o : varying) {
                int c = Vectors.compare(side.codes[o], side.precisions[o], side.scales[o], cols[o], i, cols[o], j);
                if (c != 0) {
                    return c;
                }
            }
            return 0;
        }

        /**
         * Whether the next {@link #nextRun} moves off the current batch or resets the carry (its run
         * reaches the batch's end): the vectors the last runs were named in then change, so an
         * output batch that picks rows from them must be handed on first.
         */
        boolean advanceLoads() {
            if (cols == null || p >= selN) {
                return true;
            }
            if (endFrom != p) {
                endAt = scanRun(p);
                endFrom = p;
            }
            return endAt >= selN;
        }

        private int runEnd(int s) {
            if (endFrom == s) {
                return endAt;
            }
            return scanRun(s);
        }

        /** The end of the run that starts at kept row {@code s} of the current batch (checking the order). */
        private int scanRun(int s) {
            int first = row(s);
            int j = s + 1;
            if (fastKey >= 0) {
                long[] vals = keyVals;
                long key = vals[first];
                while (j < selN) {
                    long x = vals[row(j)];
                    if (x != key) {
                        if (x < key) {
                            disorder(seen + j + 1);
                        }
                        break;
                    }
                    j++;
                }
                return j;
            }
            while (j < selN) {
                int c = compareInBatch(row(j), first);
                if (c != 0) {
                    if (c < 0) {
                        disorder(seen + j + 1);
                    }
                    break;
                }
                j++;
            }
            return j;
        }

        private boolean anyNullKey(ColumnVector[] c, int i) {
            if (!keyNulls && c == cols) {
                return false;
            }
            for (int k : side.keys) {
                if (c[k].isNullAt(i)) {
                    return true;
                }
            }
            return false;
        }

        private void disorder(long rowNumber) {
            String what = side.table == null ? "a columnar merge join's input" : "table " + side.table;
            throw new IllegalStateException("colocate: " + what + " bucket " + bucket + " is not in (" + side.keyNames
                    + ") order at its row " + rowNumber + ": its replica's files were not written sorted by the bucket "
                    + "key, and a merge join over them would miss rows, so the query stops instead of returning wrong "
                    + "rows; set spark.colocate.sortedScan=false to have Spark sort them, and rewrite the partition");
        }

        private void appendCarry(int from, int to) {
            for (int o : side.needed) {
                Vectors.gather(side.codes[o], side.precisions[o], side.scales[o], cols[o], all ? null : sel, from, to,
                        carry[o], carryN);
            }
            carryN += to - from;
        }

        /**
         * {@link #nextRun} when the next run lies wholly inside the current batch (so it loads
         * nothing and copies nothing), for the fast inner loop; false, changing nothing, otherwise.
         */
        boolean nextRunInBatch() {
            if (advanceLoads()) {
                return false;
            }
            runCols = cols;
            runRows = all ? null : sel;
            runFrom = p;
            runTo = endAt;
            runNull = false; // only a batch with a fast key steps here: its keys have no null
            p = endAt;
            return true;
        }

        /** Moves to the next run of equal keys; false at the end of the input. */
        boolean nextRun() {
            if (cols == null || p >= selN) {
                if (!load()) {
                    return false;
                }
                if (carryValid && compareKeys(side, cols, row(0), side, carryCols, 0) < 0) {
                    disorder(seen + 1);
                }
            }
            int s = p;
            boolean isNull = anyNullKey(cols, row(s));
            int j = runEnd(s);
            if (j < selN) {
                runCols = cols;
                runRows = all ? null : sel;
                runFrom = s;
                runTo = j;
                runNull = isNull;
                p = j;
                return true;
            }
            // The run reaches the end of the batch: copy it, it may go on in the next ones.
            owner.flush();
            for (OnHeapColumnVector v : carry) {
                if (v != null) {
                    v.reset();
                }
            }
            carryN = 0;
            appendCarry(s, selN);
            while (load()) {
                j = 0;
                while (j < selN) {
                    int c = compareKeys(side, cols, row(j), side, carryCols, 0);
                    if (c != 0) {
                        if (c < 0) {
                            disorder(seen + j + 1);
                        }
                        break;
                    }
                    j++;
                }
                if (j > 0) {
                    appendCarry(0, j);
                }
                if (j < selN) {
                    p = j;
                    break;
                }
            }
            runCols = carryCols;
            runRows = null;
            runFrom = 0;
            runTo = carryN;
            runNull = isNull;
            carryValid = true;
            return true;
        }
    }

    private static final int NONE = 0, MATCH = 1, LEFT_ONLY = 2, RIGHT_ONLY = 3, BOTH_NULL = 4;

    /** The merge of one bucket, resumable wherever an output batch fills up. */
    final class Merge extends AbstractIterator<ColumnarBatch> {
        private final Cursor lc;
        private final Cursor rc;
        private final BasePredicate cond;
        private final OnHeapColumnVector[] out;
        private final ColumnarBatch batch;
        private final PickedVector[] picked;
        private final ColumnarBatch pickedBatch;
        private int outN;
        private final int[] pl = new int[batchRows];
        private final int[] pr = new int[batchRows];
        private int pn;
        // the vectors the pending pairs' rows are in (null: no row of that side yet), and whether a
        // pending pair has no row of that side (-1)
        private ColumnVector[] pendL, pendR;
        private boolean minusL, minusR;
        private boolean started, done, haveL, haveR;
        private boolean advance;   // the finished group's runs are yet to be moved past (finishGroup)
        private ColumnarBatch ready;
        // the group (one key's runs) being emitted
        private int kind = NONE, gi, gj, phase;
        private boolean matched;
        private boolean[] rMatched = new boolean[16];
        private final JoinedRow joined = new JoinedRow();
        private ColumnarBatchRow lRow, rRow;
        // no output column (count(*) above): an output row is a count, no row numbers are kept, and
        // a batch need not end where an input moves on (it picks nothing from the inputs)
        private final boolean counting = outTypes.length == 0;
        private final boolean plainInner = joinType == INNER && condition == null;

        Merge(Iterator<ColumnarBatch> l, Iterator<ColumnarBatch> r) {
            lc = new Cursor(l, left, this);
            rc = new Cursor(r, right, this);
            if (condition != null) {
                cond = Predicate.create(condition, conditionInput);
                cond.initialize(TaskContext.getPartitionId());
            } else {
                cond = null;
            }
            out = new OnHeapColumnVector[outTypes.length];
            for (int c = 0; c < out.length; c++) {
                out[c] = new OnHeapColumnVector(batchRows, outTypes[c]);
            }
            batch = new ColumnarBatch(out);
            picked = new PickedVector[outTypes.length];
            for (int c = 0; c < picked.length; c++) {
                picked[c] = new PickedVector(outTypes[c]);
            }
            pickedBatch = new ColumnarBatch(picked);
        }

        @Override
        public boolean hasNext() {
            if (ready == null && !done) {
                ready = fill();
            }
            return ready != null;
        }

        @Override
        public ColumnarBatch next() {
            if (!hasNext()) {
                throw new java.util.NoSuchElementException();
            }
            ColumnarBatch b = ready;
            ready = null;
            return b;
        }

        private ColumnarBatch fill() {
            for (OnHeapColumnVector v : out) {
                v.reset();
            }
            outN = 0;
            if (!started) {
                started = true;
                haveL = lc.nextRun();
                haveR = rc.nextRun();
            }
            if (advance) {
                advance = false;
                finishGroup();
            }
            // A batch ends when it is full, and before its rows' vectors change: before a cursor
            // moves off its batch or carry (advance), or a group's runs are in other vectors than
            // the pending pairs'. So it mostly picks its rows where they are (no copy).
            while (outN + pn < batchRows) {
                if (kind == NONE && plainInner) {
                    fastInner();
                    if (outN + pn >= batchRows) {
                        break;
                    }
                }
                if (kind == NONE && !startGroup()) {
                    done = true;
                    break;
                }
                if (pn > 0 && otherVectors()) {
                    break;
                }
                if (emitGroup()) {
                    if (pn > 0 && !counting
                            && ((kind != RIGHT_ONLY && lc.advanceLoads()) || (kind != LEFT_ONLY && rc.advanceLoads()))) {
                        advance = true;
                        break;
                    }
                    finishGroup();
                }
            }
            if (outN == 0 && pn > 0) {
                for (int c = 0; c < picked.length; c++) {
                    boolean fromLeft = outSide[c] == 0;
                    ColumnVector[] src = fromLeft ? pendL : pendR;
                    picked[c].point(src == null ? null : src[outOrdinal[c]], fromLeft ? pl : pr, pn,
                            fromLeft ? minusL : minusR);
                }
                pickedBatch.setNumRows(pn);
                pn = 0;
                pendL = pendR = null;
                minusL = minusR = false;
                return pickedBatch;
            }
            flush();
            if (outN == 0) {
                return null; // only when done: the loop ends early only with rows
            }
            batch.setNumRows(outN);
            return batch;
        }

        /**
         * The inner join without a condition over two batches that compare on their fast keys
         * (unique ids, SQL1's case): one loop over the two key arrays, stepping whole runs, that
         * leaves to the general path (startGroup, emitGroup, finishGroup) every group it cannot
         * finish here: a run in the carry, a next run that reaches a batch's end, a cross product
         * that does not fit the output batch. It stops between groups, so that path resumes there.
         */
        private void fastInner() {
            while (outN + pn < batchRows && haveL && haveR && lc.runCols == lc.cols && rc.runCols == rc.cols
                    && fastPair()) {
                long a = lc.keyVals[lc.runRow(lc.runFrom)], b = rc.keyVals[rc.runRow(rc.runFrom)];
                if (a < b) {
                    if (!lc.nextRunInBatch()) {
                        return;
                    }
                } else if (a > b) {
                    if (!rc.nextRunInBatch()) {
                        return;
                    }
                } else {
                    int ln = lc.runSize(), rn = rc.runSize();
                    if ((long) outN + pn + (long) ln * rn > batchRows || lc.advanceLoads() || rc.advanceLoads()
                            || (pn > 0 && otherVectors())) {
                        return; // the last: pending rows of a carried run, handed on before these (not copied)
                    }
                    if (counting) {
                        pn += ln * rn;
                    } else {
                        for (int i = 0; i < ln; i++) {
                            addPairs(lc.runRow(lc.runFrom + i), 0, rn);
                        }
                    }
                    lc.nextRunInBatch();
                    rc.nextRunInBatch();
                }
            }
        }

        private int pairL = -1, pairR = -1;
        private boolean pairFast;

        /**
         * Whether the two current batches compare on their fast keys alone: each has one varying
         * integral key, the same one, and their other keys (constant in each batch: the partition
         * columns) are equal. Checked once per pair of batches.
         */
        private boolean fastPair() {
            if (lc.loads != pairL || rc.loads != pairR) {
                pairL = lc.loads;
                pairR = rc.loads;
                boolean fast = lc.fastKey >= 0 && rc.fastKey >= 0 && lc.fastPos == rc.fastPos
                        && lc.fastInt == rc.fastInt;
                for (int k = 0; fast && k < left.keys.length; k++) {
                    if (k != lc.fastPos) {
                        int o = left.keys[k];
                        fast = Vectors.compare(left.codes[o], left.precisions[o], left.scales[o], lc.cols[o],
                                lc.row(0), rc.cols[right.keys[k]], rc.row(0)) == 0;
                    }
                }
                pairFast = fast;
            }
            return pairFast;
        }

        /** Whether the current group's runs are in other vectors than the pending pairs' rows. */
        private boolean otherVectors() {
            return (pendL != null && haveL && lc.runCols != pendL) || (pendR != null && haveR && rc.runCols != pendR);
        }

        private boolean startGroup() {
            if (!haveL && !haveR) {
                return false;
            }
            if (haveL && haveR) {
                int li = lc.runRow(lc.runFrom), ri = rc.runRow(rc.runFrom);
                int c = lc.runCols == lc.cols && rc.runCols == rc.cols && fastPair()
                        ? Long.compare(lc.keyVals[li], rc.keyVals[ri])
                        : lc.runNull || rc.runNull ? compareKeys(left, lc.runCols, li, right, rc.runCols, ri)
                        : compareValues(left, lc.runCols, li, right, rc.runCols, ri);
                kind = c < 0 ? LEFT_ONLY : c > 0 ? RIGHT_ONLY : lc.runNull ? BOTH_NULL : MATCH;
            } else {
                kind = haveL ? LEFT_ONLY : RIGHT_ONLY;
            }
            gi = 0;
            gj = 0;
            phase = 0;
            matched = false;
            if (kind == MATCH && cond != null && joinType == RIGHT_OUTER) {
                int n = rc.runSize();
                if (rMatched.length < n) {
                    rMatched = new boolean[Math.max(n, 2 * rMatched.length)];
                }
                java.util.Arrays.fill(rMatched, 0, n, false);
            }
            return true;
        }

        private void finishGroup() {
            int k = kind;
            kind = NONE;
            if (k != RIGHT_ONLY) {
                haveL = lc.nextRun();
            }
            if (k != LEFT_ONLY) {
                haveR = rc.nextRun();
            }
        }

        private boolean full() {
            return outN + pn >= batchRows;
        }

        /** Emits the current group's rows until done (true) or the batch is full (false). */
        private boolean emitGroup() {
            switch (kind) {
                case LEFT_ONLY:
                    return leftAlone();
                case RIGHT_ONLY:
                    return rightAlone();
                case BOTH_NULL:
                    if (phase == 0) {
                        if (!leftAlone()) {
                            return false;
                        }
                        phase = 1;
                        gi = 0;
                    }
                    return rightAlone();
                default:
                    return cond == null ? matchAll() : matchWhere();
            }
        }

        private boolean leftAlone() {
            if (joinType != LEFT_OUTER && joinType != LEFT_ANTI) {
                return true;
            }
            int n = lc.runSize();
            while (gi < n) {
                if (full()) {
                    return false;
                }
                add(lc.runRow(lc.runFrom + gi), -1);
                gi++;
            }
            return true;
        }

        private boolean rightAlone() {
            if (joinType != RIGHT_OUTER) {
                return true;
            }
            int n = rc.runSize();
            while (gi < n) {
                if (full()) {
                    return false;
                }
                add(-1, rc.runRow(rc.runFrom + gi));
                gi++;
            }
            return true;
        }

        private boolean matchAll() {
            int ln = lc.runSize();
            if (joinType == LEFT_ANTI) {
                return true;
            }
            if (joinType == LEFT_SEMI) {
                while (gi < ln) {
                    if (full()) {
                        return false;
                    }
                    add(lc.runRow(lc.runFrom + gi), -1);
                    gi++;
                }
                return true;
            }
            int rn = rc.runSize();
            while (gi < ln) {
                int l = lc.runRow(lc.runFrom + gi);
                int m = Math.min(rn - gj, batchRows - outN - pn);
                if (m <= 0 && gj < rn) {
                    return false;
                }
                addPairs(l, gj, m);
                gj += m;
                if (gj < rn) {
                    return false;
                }
                gj = 0;
                gi++;
            }
            return true;
        }

        /** {@link #add} of left row {@code l} with the right run's rows {@code from..from+m). */
        private void addPairs(int l, int from, int m) {
            if (m <= 0) {
                return;
            }
            if (counting) {
                pn += m;
                return;
            }
            if ((pendL != null && pendL != lc.runCols) || (pendR != null && pendR != rc.runCols)) {
                flush();
            }
            pendL = lc.runCols;
            pendR = rc.runCols;
            int[] rows = rc.runRows;
            int base = rc.runFrom + from;
            for (int k = 0; k < m; k++) {
                pl[pn + k] = l;
                pr[pn + k] = rows == null ? base + k : rows[base + k];
            }
            pn += m;
        }

        private boolean test(int l, int r) {
            if (lRow == null || lRowCols != lc.runCols) {
                lRow = new ColumnarBatchRow(lc.runCols);
                lRowCols = lc.runCols;
            }
            if (rRow == null || rRowCols != rc.runCols) {
                rRow = new ColumnarBatchRow(rc.runCols);
                rRowCols = rc.runCols;
            }
            lRow.rowId = l;
            rRow.rowId = r;
            return cond.eval(joined.apply(lRow, rRow));
        }

        private ColumnVector[] lRowCols, rRowCols;

        private boolean matchWhere() {
            int ln = lc.runSize();
            int rn = rc.runSize();
            if (phase == 0) {
                while (gi < ln) {
                    int l = lc.runRow(lc.runFrom + gi);
                    if (joinType == LEFT_SEMI || joinType == LEFT_ANTI) {
                        if (full()) {
                            return false;
                        }
                        boolean any = false;
                        for (int j = 0; j < rn && !any; j++) {
                            any = test(l, rc.runRow(rc.runFrom + j));
                        }
                        if (any == (joinType == LEFT_SEMI)) {
                            add(l, -1);
                        }
                        gi++;
                        continue;
                    }
                    while (gj < rn) {
                        if (full()) {
                            return false;
                        }
                        int r = rc.runRow(rc.runFrom + gj);
                        if (test(l, r)) {
                            add(l, r);
                            matched = true;
                            if (joinType == RIGHT_OUTER) {
                                rMatched[gj] = true;
                            }
                        }
                        gj++;
                    }
                    if (joinType == LEFT_OUTER && !matched) {
                        if (full()) {
                            return false;
                        }
                        add(l, -1);
                    }
                    matched = false;
                    gj = 0;
                    gi++;
                }
                if (joinType != RIGHT_OUTER) {
                    return true;
                }
                phase = 1;
                gj = 0;
            }
            while (gj < rn) {
                if (!rMatched[gj]) {
                    if (full()) {
                        return false;
                    }
                    add(-1, rc.runRow(rc.runFrom + gj));
                }
                gj++;
            }
            return true;
        }

        private void add(int l, int r) {
            if (counting) {
                pn++;
                return;
            }
            if ((l >= 0 && pendL != null && pendL != lc.runCols) || (r >= 0 && pendR != null && pendR != rc.runCols)) {
                flush(); // rows of other vectors in one batch (a both-null group of an outer join): copied
            }
            if (l >= 0) {
                pendL = lc.runCols;
            } else {
                minusL = true;
            }
            if (r >= 0) {
                pendR = rc.runCols;
            } else {
                minusR = true;
            }
            pl[pn] = l;
            pr[pn] = r;
            pn++;
        }

        /** Writes the pending pairs' columns into the output batch (before any input vector changes). */
        void flush() {
            if (pn == 0) {
                return;
            }
            for (int c = 0; c < out.length; c++) {
                boolean fromLeft = outSide[c] == 0;
                Side s = fromLeft ? left : right;
                ColumnVector[] src = fromLeft ? pendL : pendR;
                int o = outOrdinal[c];
                Vectors.gather(s.codes[o], s.precisions[o], s.scales[o], src == null ? null : src[o],
                        fromLeft ? pl : pr, 0, pn, out[c], outN);
            }
            outN += pn;
            pn = 0;
            pendL = pendR = null;
            minusL = minusR = false;
        }
    }
}
