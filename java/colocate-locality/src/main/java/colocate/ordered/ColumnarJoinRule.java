package colocate.ordered;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.joins.SortMergeJoinExec;
import org.apache.spark.sql.internal.SQLConf;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Puts {@link ColumnarMergeJoinExec} where Spark planned a sort-merge join whose two inputs are
 * colocated bucket reads in key order (the {@link SkipSortedSort} rewrite, so
 * {@link AssertOrderedExec} over a read) or such columnar joins, and nothing else:
 *
 * <ul>
 *   <li>the join type is inner, left or right outer, left semi or left anti;</li>
 *   <li>every key is a column of its read (not an expression), of one type on both sides, integral,
 *       date, timestamp, string (binary collation) or decimal;</li>
 *   <li>between join and read there are only filters and renames, no subquery;</li>
 *   <li>every column the join outputs is of a type the batches copy (atomic types), and the reads
 *       produce column batches.</li>
 * </ul>
 *
 * <p>Anything else keeps Spark's join. {@value #FLAG} = {@code auto} (the default) uses it when
 * {@link #AUTO} is on, {@code true} wherever the conditions hold, {@code false} never.
 */
public final class ColumnarJoinRule extends Rule<SparkPlan> {
    public static final String FLAG = "spark.colocate.join.columnar";
    /** What {@code auto} means: on, since it measured at least 1.3x Spark's merge join on SQL1, SQL2
     *  and the TPC-H join in wall and task CPU (docs/benchmarks.md, "Columnar bucket join"). */
    static final boolean AUTO = true;

    private final Rule<SparkPlan> before;

    public ColumnarJoinRule(Rule<SparkPlan> before) {
        this.before = before;
    }

    /** Whether the session's flag turns the operator on; a value other than auto/true/false stops the query. */
    public static boolean enabled() {
        String value = SQLConf.get().getConfString(FLAG, "auto").trim().toLowerCase(Locale.ROOT);
        switch (value) {
            case "true": return true;
            case "false": return false;
            case "auto": return AUTO;
            default:
                throw new IllegalArgumentException("colocate: " + FLAG + "=" + value
                        + " is not a setting: use auto, true or false");
        }
    }

    @Override
    public SparkPlan apply(SparkPlan plan) {
        SparkPlan done = before.apply(plan);
        return enabled() ? rewrite(done) : done;
    }

    private SparkPlan rewrite(SparkPlan plan) {
        List<SparkPlan> children = CollectionConverters.asJava(plan.children());
        List<SparkPlan> rewritten = new ArrayList<>(children.size());
        boolean changed = false;
        for (SparkPlan child : children) {
            SparkPlan now = rewrite(child);
            changed |= now != child;
            rewritten.add(now);
        }
        SparkPlan node = changed ? plan.withNewChildren(CollectionConverters.asScala(rewritten).toList()) : plan;
        if (node instanceof SortMergeJoinExec) {
            SparkPlan replaced = replace((SortMergeJoinExec) node);
            if (replaced != null) {
                return replaced;
            }
        }
        if (node instanceof ProjectExec && ((ProjectExec) node).child() instanceof ColumnarMergeJoinExec
                && node.references().isEmpty()) {
            // SELECT count(*) over the join: the projection above keeps none of its columns, so
            // the join hands on batches of its row count alone (ColumnarToRow reads no value).
            ColumnarMergeJoinExec join = (ColumnarMergeJoinExec) ((ProjectExec) node).child();
            if (!join.output().isEmpty()) {
                return node.withNewChildren(CollectionConverters.asScala(List.<SparkPlan>of(join.counting())).toList());
            }
        }
        return node;
    }

    /** One input of the join: its columnar plan, its filters and renames folded into expressions over it. */
    private static final class Input {
        SparkPlan base;
        AssertOrderedExec ordered;
        final List<Expression> filters = new ArrayList<>();
        final Map<ExprId, Expression> renames = new HashMap<>();
        final Set<ExprId> columns = new HashSet<>();
        String table = "";

        Expression resolve(Expression e) {
            return substitute(e, renames);
        }
    }

    static Expression substitute(Expression e, Map<ExprId, Expression> map) {
        if (map.isEmpty()) {
            return e;
        }
        return (Expression) e.transformUp(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
                return x instanceof Attribute && map.containsKey(((Attribute) x).exprId());
            }

            @Override
            public Expression apply(Expression x) {
                return isDefinedAt(x) ? map.get(((Attribute) x).exprId()) : x;
            }
        });
    }

    private static boolean within(Expression e, Set<ExprId> columns) {
        for (Attribute a : CollectionConverters.asJava(e.references().toSeq())) {
            if (!columns.contains(a.exprId())) {
                return false;
            }
        }
        return true;
    }

    private static Input input(SparkPlan child) {
        Input in = new Input();
        SparkPlan node = child;
        if (node instanceof AssertOrderedExec) {
            in.ordered = (AssertOrderedExec) node;
            in.table = in.ordered.table();
            node = in.ordered.child();
        }
        List<SparkPlan> chain = new ArrayList<>();
        while (node instanceof ProjectExec || node instanceof FilterExec) {
            chain.add(node);
            node = node.children().head();
        }
        if (in.ordered != null) {
            if (!(node instanceof FileSourceScanExec) || !node.supportsColumnar()) {
                return null;
            }
        } else if (!(node instanceof ColumnarMergeJoinExec)) {
            return null;
        }
        in.base = node;
        for (Attribute a : CollectionConverters.asJava(node.output())) {
            if (Vectors.code(a.dataType()) < 0) {
                return null; // a column the carry could not copy
            }
            in.columns.add(a.exprId());
        }
        for (int i = chain.size() - 1; i >= 0; i--) {
            SparkPlan n = chain.get(i);
            if (n instanceof FilterExec) {
                Expression condition = in.resolve(((FilterExec) n).condition());
                if (SkipSortedSort.holdsSubquery(condition) || !condition.deterministic() || !within(condition, in.columns)) {
                    return null;
                }
                in.filters.add(condition);
                continue;
            }
            for (NamedExpression ne : CollectionConverters.asJava(((ProjectExec) n).projectList())) {
                if (ne instanceof Attribute) {
                    continue;
                }
                if (!(ne instanceof Alias)) {
                    return null;
                }
                Expression e = ((Alias) ne).child();
                if (e instanceof Cast && ((Cast) e).child().dataType().equals(e.dataType())) {
                    e = ((Cast) e).child(); // a view's cast of a column to its own type
                }
                if (!(e instanceof Attribute)) {
                    return null;
                }
                Expression base = in.resolve(e);
                if (!(base instanceof Attribute) || !in.columns.contains(((Attribute) base).exprId())) {
                    return null;
                }
                in.renames.put(ne.exprId(), base);
            }
        }
        return in;
    }

    private static Option<Expression> conjunction(List<Expression> filters) {
        Expression all = null;
        for (Expression f : filters) {
            all = all == null ? f : new And(all, f);
        }
        return Option.apply(all);
    }

    /** The columnar join standing for {@code join}, or null when it must stay Spark's. */
    static SparkPlan replace(SortMergeJoinExec join) {
        int type = ColumnarMergeJoinExec.typeCode(join.joinType());
        if (type < 0 || join.isSkewJoin()) {
            return null;
        }
        Input l = input(join.left());
        Input r = input(join.right());
        if (l == null || r == null) {
            return null;
        }
        for (ExprId id : l.columns) {
            if (r.columns.contains(id)) {
                return null; // one read's columns on both sides: the output could not tell them apart
            }
        }
        List<Expression> lk = CollectionConverters.asJava(join.leftKeys());
        List<Expression> rk = CollectionConverters.asJava(join.rightKeys());
        List<Expression> leftKeys = new ArrayList<>(), rightKeys = new ArrayList<>();
        for (int i = 0; i < lk.size(); i++) {
            Expression a = l.resolve(lk.get(i));
            Expression b = r.resolve(rk.get(i));
            if (!(a instanceof Attribute) || !(b instanceof Attribute) || !l.columns.contains(((Attribute) a).exprId())
                    || !r.columns.contains(((Attribute) b).exprId()) || !a.dataType().equals(b.dataType())
                    || !Vectors.isKey(Vectors.code(a.dataType()))) {
                return null;
            }
            leftKeys.add(a);
            rightKeys.add(b);
        }
        if (!orderedBy(l, leftKeys) || !orderedBy(r, rightKeys)) {
            return null;
        }
        Map<ExprId, Expression> renames = new HashMap<>(l.renames);
        renames.putAll(r.renames);
        Set<ExprId> both = new HashSet<>(l.columns);
        both.addAll(r.columns);
        Option<Expression> condition = Option.empty();
        if (join.condition().isDefined()) {
            Expression c = substitute(join.condition().get(), renames);
            if (SkipSortedSort.holdsSubquery(c) || !c.deterministic() || !within(c, both)) {
                return null;
            }
            condition = Option.apply(c);
        }
        // The output in the reads' columns (nullable where the join makes them so), and the renames
        // Spark's output had over them, restored by a projection above.
        List<Attribute> output = new ArrayList<>();
        List<NamedExpression> project = new ArrayList<>();
        boolean renamed = false;
        for (Attribute a : CollectionConverters.asJava(join.output())) {
            Expression base = substitute(a, renames);
            if (!(base instanceof Attribute) || !both.contains(((Attribute) base).exprId())) {
                return null;
            }
            Attribute col = ((Attribute) base).withNullability(a.nullable());
            if (Vectors.code(col.dataType()) < 0) {
                return null;
            }
            output.add(col);
            if (col.exprId().equals(a.exprId())) {
                project.add(col);
            } else {
                renamed = true;
                project.add(new Alias(col, a.name(), a.exprId(), a.qualifier(), Option.empty(),
                        CollectionConverters.asScala(new ArrayList<String>()).toList()));
            }
        }
        Partitioning partitioning = join.outputPartitioning();
        if (partitioning instanceof Expression) {
            partitioning = (Partitioning) substitute((Expression) partitioning, renames);
        }
        List<SortOrder> ordering = new ArrayList<>();
        for (SortOrder o : CollectionConverters.asJava(join.outputOrdering())) {
            ordering.add((SortOrder) substitute(o, renames));
        }
        Seq<Attribute> out = CollectionConverters.asScala(output).toList();
        ColumnarMergeJoinExec columnar = new ColumnarMergeJoinExec(CollectionConverters.asScala(leftKeys).toList(),
                CollectionConverters.asScala(rightKeys).toList(), join.joinType(), condition, conjunction(l.filters),
                conjunction(r.filters), out, partitioning, CollectionConverters.asScala(ordering).toList(), l.table,
                r.table, l.base, r.base);
        return renamed ? new ProjectExec(CollectionConverters.asScala(project).toList(), columnar) : columnar;
    }

    /** A read's rows come in the order of {@code keys} (the order its AssertOrderedExec checked). */
    private static boolean orderedBy(Input in, List<Expression> keys) {
        if (in.ordered == null) {
            return true; // a columnar join's output: Spark planned no sort, so its ordering satisfied the join
        }
        List<SortOrder> order = CollectionConverters.asJava(in.ordered.sortOrder());
        if (order.size() != keys.size()) {
            return false;
        }
        for (int i = 0; i < keys.size(); i++) {
            Expression k = in.resolve(order.get(i).child());
            if (!k.semanticEquals(keys.get(i))) {
                return false;
            }
        }
        return true;
    }
}
