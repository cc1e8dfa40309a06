package colocate.locality;

import java.io.IOException;
import java.net.URI;

import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * What colocate's file systems share: they only read (a write goes to the replica's own file
 * system, never through a name Spark resolves to one of several replicas), and a relative path is
 * resolved under their own scheme.
 */
abstract class ReadOnlyFileSystem extends FileSystem {
    private final String scheme;
    private final URI name;
    private Path workingDir;

    protected ReadOnlyFileSystem(String scheme) {
        this.scheme = scheme;
        this.name = URI.create(scheme + ":///");
        workingDir = new Path(scheme + ":/");
    }

    @Override
    public String getScheme() {
        return scheme;
    }

    @Override
    public URI getUri() {
        return name;
    }

    /** {@code p} made absolute under the working directory. */
    protected Path absolute(Path p) {
        return p.isAbsolute() ? p : new Path(workingDir, p);
    }

    /** The refusal of a write to {@code f}, saying where the write belongs. */
    protected abstract IOException readOnly(Path f);

    @Override
    public void setWorkingDirectory(Path dir) {
        workingDir = dir.isAbsolute() ? dir : new Path(workingDir, dir);
    }

    @Override
    public Path getWorkingDirectory() {
        return workingDir;
    }

    @Override
    public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                     short replication, long blockSize, Progressable progress) throws IOException {
        throw readOnly(f);
    }

    @Override
    public FSDataOutputStream append(Path f, int bufferSize, Progressable progress) throws IOException {
        throw readOnly(f);
    }

    @Override
    public boolean rename(Path src, Path dst) throws IOException {
        throw readOnly(src);
    }

    @Override
    public boolean delete(Path f, boolean recursive) throws IOException {
        throw readOnly(f);
    }
}
