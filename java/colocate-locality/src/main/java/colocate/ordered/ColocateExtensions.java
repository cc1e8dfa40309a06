package colocate.ordered;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * The session extension ({@code spark.sql.extensions=colocate.ordered.ColocateExtensions}) that
 * lets a colocated sort-merge join read each bucket's key-sorted files in order instead of
 * sorting them again ({@link SkipSortedSort}), and, where {@value ColumnarJoinRule#FLAG} allows, join
 * them on column batches ({@link ColumnarJoinRule}), and reads a table of a group created at k·N
 * buckets coalesced to N where its registration asks for it ({@link CoalescedBucketScan}).
 *
 * <p>It is injected as a columnar rule because that is the one hook Spark runs after
 * EnsureRequirements has placed its sorts, in both the adaptive and the non-adaptive planner,
 * and before whole-stage code generation.
 */
public class ColocateExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectPlannerStrategy(new AbstractFunction1<SparkSession, SparkStrategy>() {
            @Override
            public SparkStrategy apply(SparkSession session) {
                return new CoalescedBucketScan();
            }
        });
        extensions.injectColumnar(new AbstractFunction1<SparkSession, ColumnarRule>() {
            @Override
            public ColumnarRule apply(SparkSession session) {
                return new ColumnarRule() {
                    private final Rule<SparkPlan> rule = new ColumnarJoinRule(new SkipSortedSort());

                    @Override
                    public Rule<SparkPlan> preColumnarTransitions() {
                        return rule;
                    }
                };
            }
        });
        return BoxedUnit.UNIT;
    }
}
