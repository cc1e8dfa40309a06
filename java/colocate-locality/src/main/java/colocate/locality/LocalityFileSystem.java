package colocate.locality;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * The local file system under the scheme {@code colocatefile:///path}, read-only, whose block
 * locations are the host of the colocate backend that holds the file.
 *
 * <p>Why: Spark gives a file scan's partitions preferred locations from the hosts of the files'
 * blocks ({@code getFileBlockLocations}, asked while listing). The plain local file system answers
 * "localhost" for every file, which Spark ignores, so a bucket's task runs on any executor. A
 * backend that is a worker's local disk is on one host: reporting that host lets the scheduler run
 * bucket <i>b</i> NODE_LOCAL on the machine that stores the replica it reads.
 *
 * <p>Why a scheme of its own instead of replacing {@code file://}: only the replicas a colocated
 * read registers go through it; every other local path (outputs, event logs, staging) keeps the
 * stock file system. The mapping from backend root to host comes from the Hadoop configuration key
 * {@value #ROOTS_KEY}: one {@code host=root} per line, root a local path such as
 * {@code /data/be1}; the longest root that contains a file names its host. A file under no root
 * gets no location (Spark then schedules it anywhere). The job sets the key per query, so the
 * instance must not be cached: set {@code fs.colocatefile.impl.disable.cache=true}.
 */
public class LocalityFileSystem extends ReadOnlyFileSystem {
    public static final String SCHEME = "colocatefile";
    public static final String ROOTS_KEY = "colocate.locality.roots";

    private final RawLocalFileSystem local = new RawLocalFileSystem();
    private final List<String[]> roots = new ArrayList<>(); // {root without trailing '/', host}
    public LocalityFileSystem() {
        super(SCHEME);
    }

    @Override
    public void initialize(URI name, Configuration conf) throws IOException {
        super.initialize(name, conf);
        setConf(conf);
        local.initialize(URI.create("file:///"), conf);
        roots.clear();
        roots.addAll(parseRoots(conf.get(ROOTS_KEY, "")));
    }

    /** {@code host=root} lines -> {root, host} pairs, longest root first. */
    static List<String[]> parseRoots(String spec) {
        List<String[]> out = new ArrayList<>();
        for (String line : spec.split("\n")) {
            line = line.trim();
            int eq = line.indexOf('=');
            if (line.isEmpty() || eq <= 0) {
                continue;
            }
            String host = line.substring(0, eq).trim();
            String root = line.substring(eq + 1).trim();
            while (root.length() > 1 && root.endsWith("/")) {
                root = root.substring(0, root.length() - 1);
            }
            if (!host.isEmpty() && root.startsWith("/")) {
                out.add(new String[] {root, host});
            }
        }
        out.sort((a, b) -> Integer.compare(b[0].length(), a[0].length()));
        return out;
    }

    /** The host of the backend whose root contains {@code path} (a local path), or null. */
    public String hostOf(String path) {
        for (String[] r : roots) {
            if (path.equals(r[0]) || path.startsWith(r[0].equals("/") ? "/" : r[0] + "/")) {
                return r[1];
            }
        }
        return null;
    }

    private Path toLocal(Path p) {
        Path q = absolute(p);
        return new Path("file", null, q.toUri().getPath());
    }

    private Path toOurs(Path p) {
        return new Path(SCHEME, null, p.toUri().getPath());
    }

    private FileStatus ours(FileStatus s) {
        return new FileStatus(s.getLen(), s.isDirectory(), 1, s.getBlockSize(), s.getModificationTime(),
                toOurs(s.getPath()));
    }

    @Override
    public BlockLocation[] getFileBlockLocations(FileStatus file, long start, long len) throws IOException {
        if (file == null) {
            return null;
        }
        if (start < 0 || len < 0) {
            throw new IllegalArgumentException("Invalid start or len parameter");
        }
        String host = hostOf(file.getPath().toUri().getPath());
        if (host == null) {
            return super.getFileBlockLocations(file, start, len); // "localhost": no preference
        }
        return new BlockLocation[] {
            new BlockLocation(new String[] {host + ":0"}, new String[] {host}, 0, file.getLen())
        };
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        return local.open(toLocal(f), bufferSize);
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
        return ours(local.getFileStatus(toLocal(f)));
    }

    @Override
    public FileStatus[] listStatus(Path f) throws FileNotFoundException, IOException {
        FileStatus[] in = local.listStatus(toLocal(f));
        FileStatus[] out = new FileStatus[in.length];
        for (int i = 0; i < in.length; i++) {
            out[i] = ours(in[i]);
        }
        return out;
    }

    @Override
    protected IOException readOnly(Path f) {
        return new IOException(SCHEME + ":// is read-only (colocate's locality reads); write "
                + f.toUri().getPath() + " through file:// instead");
    }

    @Override
    public boolean mkdirs(Path f, FsPermission permission) throws IOException {
        // Spark's catalog makes sure a table's and a partition's LOCATION exist: harmless, allowed.
        return local.mkdirs(toLocal(f), permission);
    }
}
