package colocatetest;

/** A user's function, called by Spark's {@code reflect} inside tasks: an executor that was not
 * given the user's jar cannot load this class. */
public final class Tag {
    private Tag() {}

    public static String of(String s) {
        return "tag:" + s;
    }
}
