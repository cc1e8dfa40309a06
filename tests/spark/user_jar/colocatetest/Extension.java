package colocatetest;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.types.DataTypes;
import scala.Function1;
import scala.Tuple3;
import scala.collection.immutable.Seq;
import scala.runtime.BoxedUnit;

/** A user's session extension (spark.sql.extensions): it adds the SQL function
 * {@code colocate_test_ext()}, so a query names it only in a session that kept the extension. */
public final class Extension implements Function1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        Function1<Seq<Expression>, Expression> builder = args -> Literal.create("ext", DataTypes.StringType);
        extensions.injectFunction(new Tuple3<>(FunctionIdentifier.apply("colocate_test_ext"),
                new ExpressionInfo(Extension.class.getName(), "colocate_test_ext"), builder));
        return BoxedUnit.UNIT;
    }
}
