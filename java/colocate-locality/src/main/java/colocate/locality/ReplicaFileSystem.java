package colocate.locality;

import java.io.ByteArrayInputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.InflaterInputStream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;
import org.apache.spark.TaskContext;

/**
 * A registered bucket directory that names all of its verified replicas, under the scheme
 * {@code colocatereplica:///<token>}: reads go to one of them, and a task that Spark runs again
 * after a failed attempt reads a replica whose bytes match the catalog's checksum.
 *
 * <p>Why: a table registered in a user's session is read by the user's own {@code spark.sql}, so
 * no driver-side code sees a bad page and can register another replica (what the join job's
 * failover does). The one thing Spark does by itself is run a failed task again; this file system
 * makes that retry read elsewhere. Spark never hands out a failed task's rows, so no row is
 * returned twice.
 *
 * <p>The token is the URL-safe base64 of the zlib-compressed text of a few lines (written by
 * {@code spark/replica_paths.py}): {@code colocate-replicas 1}; table, partition, bucket
 * (tab-separated); the recorded files' names and sizes (tab-separated, alternating); then one line
 * per candidate replica in preference order: replica id, backend id, the catalog's replica
 * checksum (sha-256 over the sorted {@code name:sha256} lines of its files), the directory URI it
 * is read through, the directory where a replica found bad is reported (read by the control plane
 * the next time it runs, which marks the replica bad) and the directory as the catalog names it.
 * Files of one bucket's good replicas have the same names and bytes.
 *
 * <p>Which replica a file is read from: outside a task (the driver's listing), the first candidate
 * that holds exactly the recorded files; in a task's first attempt, the first whose files hash to
 * its recorded checksum, proven once per executor ({@link #VERIFY_KEY}; off: the file at its
 * recorded size); in a later attempt, the first candidate whose files hash to
 * its recorded checksum (when the first does, the failure was not its bytes and it is read
 * again). Each candidate passed over is reported. When none is left, opening fails naming the
 * bucket and every replica. Only Spark's public {@code TaskContext} is used, so the source
 * compiles for every Spark line.
 */
public class ReplicaFileSystem extends ReadOnlyFileSystem {
    public static final String SCHEME = "colocatereplica";
    static final String MAGIC = "colocate-replicas 1";
    // The backing table's own LOCATION: an empty directory of this scheme (Spark's in-memory catalog
    // checks each partition's directory with the table directory's file system), never a token.
    static final String EMPTY = "_empty";
    // (task attempt id, candidate directory) -> null when its files match the checksum, else why not
    private static final Map<String, String> VERDICTS = new ConcurrentHashMap<>();
    private static final Set<String> REPORTED = ConcurrentHashMap.newKeySet(); // replica ids, per JVM
    // Hadoop setting (spark.hadoop.colocate.replica.verify-checksums): prove a replica's bytes
    // against the catalog's checksum before a task's first read of it. Parquet's page checksums
    // cover the pages only: a flipped byte in a footer's column metadata or in the Spark schema it
    // carries can read as fewer, more or other rows with no error (measured: 5 of 1,419 positions of
    // an 89-row file), and only the whole file's hash sees it. Off: sizes only, one hash less.
    public static final String VERIFY_KEY = "colocate.replica.verify-checksums";
    // (candidate directory, recorded checksum) whose files hashed to it: a committed replica never
    // changes, so one executor proves it once for all its tasks
    private static final Map<String, String> PROVEN = new ConcurrentHashMap<>();

    public ReplicaFileSystem() {
        super(SCHEME);
    }

    /** One bucket directory as the token names it. */
    static final class Spec {
        String table;
        String partition;
        String bucket;
        final Map<String, Long> files = new TreeMap<>(); // name -> size, as the catalog recorded them
        final List<String[]> candidates = new ArrayList<>(); // {replica, backend, checksum, uri, report dir, path}

        String label() {
            return table + " partition " + partition + " bucket " + bucket;
        }
    }

    static Spec parse(String token) throws IOException {
        String text;
        try (InputStream in = new InflaterInputStream(new ByteArrayInputStream(Base64.getUrlDecoder().decode(token)))) {
            text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException | IOException e) {
            throw new FileNotFoundException(SCHEME + ":///" + token + " is not a colocate replica set");
        }
        String[] lines = text.split("\n");
        if (lines.length < 4 || !lines[0].equals(MAGIC)) {
            throw new FileNotFoundException(SCHEME + ":///" + token + " is not a colocate replica set");
        }
        Spec spec = new Spec();
        String[] where = lines[1].split("\t", -1);
        spec.table = where[0];
        spec.partition = where.length > 1 ? where[1] : "";
        spec.bucket = where.length > 2 ? where[2] : "";
        String[] files = lines[2].split("\t");
        for (int i = 0; i + 1 < files.length; i += 2) {
            spec.files.put(files[i], Long.parseLong(files[i + 1]));
        }
        for (int i = 3; i < lines.length; i++) {
            String[] c = lines[i].split("\t", -1);
            if (c.length == 6) {
                spec.candidates.add(c);
            }
        }
        return spec;
    }

    @Override
    public void initialize(URI name, Configuration conf) throws IOException {
        super.initialize(name, conf);
        setConf(conf);
    }

    /** {token, the rest of the path after it: "" for the bucket directory, else "/name"}. */
    private String[] split(Path p) {
        Path q = absolute(p);
        String path = q.toUri().getPath();
        while (path.startsWith("/")) {
            path = path.substring(1);
        }
        int slash = path.indexOf('/');
        return slash < 0 ? new String[] {path, ""} : new String[] {path.substring(0, slash), path.substring(slash)};
    }

    private Path inCandidate(String[] candidate, String rest) {
        String dir = candidate[3].endsWith("/") ? candidate[3].substring(0, candidate[3].length() - 1) : candidate[3];
        return new Path(dir + rest);
    }

    /** What serves a path of a bucket: the candidate's spec line and, for the bucket directory,
     *  the listing its check was made on (null when none was made), so that what Spark lists is
     *  exactly what was checked: a second listing could find the disk gone in between. */
    static final class Chosen {
        final String[] candidate;
        FileStatus[] listing;

        Chosen(String[] candidate) {
            this.candidate = candidate;
        }
    }

    /** Every replica of a bucket failed. Not a {@link FileNotFoundException}: Spark lists a
     *  partition directory whose listing raises that as empty, with no error (HadoopFSUtils, for a
     *  root path), and the bucket's rows would silently be missing from the query. */
    static final class ReplicasFailedException extends IOException {
        ReplicasFailedException(String message) {
            super(message);
        }
    }

    /** The candidate (its spec line) that serves {@code rest} of bucket {@code spec}. */
    Chosen choose(Spec spec, String rest) throws IOException {
        if (!rest.isEmpty() && !spec.files.isEmpty() && !spec.files.containsKey(rest.substring(1))) {
            // a name the bucket never had (Spark looking for _spark_metadata): no replica's fault
            throw new FileNotFoundException(SCHEME + ":// " + spec.label() + " has no file " + rest.substring(1));
        }
        TaskContext task = TaskContext.get();
        int attempt = task == null ? 0 : task.attemptNumber();
        List<String> tried = new ArrayList<>();
        for (String[] c : spec.candidates) {
            Chosen chosen = new Chosen(c);
            String problem = attempt != 0 ? verdict(task.taskAttemptId(), c)
                    : task != null && !rest.isEmpty() && getConf().getBoolean(VERIFY_KEY, true) ? proven(spec, chosen)
                    : missing(spec, chosen, rest); // the driver's listing and statuses: names and sizes
            if (problem == null && attempt != 0 && rest.isEmpty()) {
                problem = missing(spec, chosen, rest); // a retried listing task: the listing it hands back, checked
            }
            if (problem == null) {
                return chosen;
            }
            tried.add("backend " + c[1] + " (" + c[3] + "): " + problem);
            report(spec, c, problem);
        }
        throw new ReplicasFailedException("colocate: cannot read " + spec.label() + ": every replica failed, so the "
                + "query stops instead of returning wrong rows; replicas tried: " + String.join("; ", tried)
                + ". The bad replicas are reported to the catalog; run 'colocate balance' to repair them");
    }

    /** Null when candidate {@code c} holds {@code rest} (the bucket directory: exactly the recorded
     *  files) at its recorded size, else what is wrong: a listing that lost a file since the
     *  registration's check would otherwise read as fewer rows. */
    private String missing(Spec spec, Chosen chosen, String rest) {
        String[] c = chosen.candidate;
        try {
            Path p = inCandidate(c, rest);
            FileSystem fs = p.getFileSystem(getConf());
            if (!rest.isEmpty()) {
                String name = rest.substring(1);
                Long want = spec.files.get(name);
                long got = fs.getFileStatus(p).getLen();
                return want == null || want == got ? null
                        : "file " + name + " has " + got + " bytes, the catalog recorded " + want;
            }
            chosen.listing = fs.listStatus(p);
            if (spec.files.isEmpty()) {
                return null; // recorded before file lists: the registration's check by bytes stands
            }
            Map<String, Long> found = new TreeMap<>();
            for (FileStatus f : chosen.listing) {
                found.put(f.getPath().getName(), f.isFile() ? f.getLen() : -1L);
            }
            for (Map.Entry<String, Long> e : spec.files.entrySet()) {
                Long got = found.remove(e.getKey());
                if (got == null) {
                    return "missing file " + e.getKey();
                }
                if (!got.equals(e.getValue())) {
                    return "file " + e.getKey() + " has " + got + " bytes, the catalog recorded " + e.getValue();
                }
            }
            return found.isEmpty() ? null : "unknown file " + found.keySet().iterator().next();
        } catch (FileNotFoundException e) {
            return "missing file " + (rest.isEmpty() ? "(the directory)" : rest.substring(1));
        } catch (IOException e) {
            return "read failed: " + e;
        }
    }

    /** Null when candidate {@code chosen} holds exactly the recorded files (names and sizes: the
     *  plainer reason when not) and they hash to the recorded checksum. */
    private String proven(Spec spec, Chosen chosen) {
        String[] c = chosen.candidate;
        if (PROVEN.size() > 10000) {
            PROVEN.clear();
        }
        String key = c[3] + "\t" + c[2];
        if (PROVEN.containsKey(key)) {
            return null;
        }
        String problem = missing(spec, chosen, "");
        if (problem == null) {
            problem = checksumProblem(c, chosen.listing); // a failure is not kept: a disk back from a blip reads again
        }
        if (problem == null) {
            PROVEN.put(key, "");
        }
        return problem;
    }

    private String verdict(long taskAttempt, String[] c) {
        String key = taskAttempt + "\t" + c[3];
        if (VERDICTS.size() > 10000) {
            VERDICTS.clear();
        }
        String why = VERDICTS.computeIfAbsent(key, k -> {
            String problem = checksumProblem(c, null);
            return problem == null ? "" : problem;
        });
        return why.isEmpty() ? null : why;
    }

    /** Null when candidate {@code c}'s files hash to its recorded checksum, else what differs;
     *  {@code listing}: its directory's, when the caller just listed it (else it is listed here). */
    String checksumProblem(String[] c, FileStatus[] listing) {
        if (c[2].isEmpty()) {
            return null; // no checksum recorded: nothing to prove it wrong
        }
        try {
            Path dir = new Path(c[3]);
            FileSystem fs = dir.getFileSystem(getConf());
            FileStatus[] files = listing != null ? listing : fs.listStatus(dir);
            List<String> lines = new ArrayList<>();
            for (FileStatus f : files) {
                if (f.isFile()) {
                    lines.add(f.getPath().getName() + ":" + sha256(fs, f.getPath()) + "\n");
                }
            }
            lines.sort(null);
            MessageDigest all = MessageDigest.getInstance("SHA-256");
            for (String line : lines) {
                all.update(line.getBytes(StandardCharsets.UTF_8));
            }
            String got = hex(all.digest());
            return got.equals(c[2]) ? null : "read failed: checksum mismatch: its files hash to " + got
                    + ", the catalog recorded " + c[2];
        } catch (FileNotFoundException e) {
            return "read failed: missing file: " + e.getMessage();
        } catch (IOException | NoSuchAlgorithmException e) {
            return "read failed: " + e;
        }
    }

    private static String sha256(FileSystem fs, Path p) throws IOException, NoSuchAlgorithmException {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        byte[] buf = new byte[1 << 16];
        try (InputStream in = fs.open(p)) {
            for (int n = in.read(buf); n >= 0; n = in.read(buf)) {
                md.update(buf, 0, n);
            }
        }
        return hex(md.digest());
    }

    private static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return sb.toString();
    }

    /** Leave one line for the control plane in the candidate's report directory (once per JVM). */
    private void report(Spec spec, String[] c, String problem) {
        if (c[4].isEmpty() || !REPORTED.add(c[0] + "\t" + problem)) {
            return;
        }
        String line = String.join("\t", c[0], c[1], spec.table, spec.partition, spec.bucket, c[5],
                problem.replace('\n', ' ').replace('\t', ' ')) + "\n";
        Path target = new Path(c[4], "r" + c[0] + "-" + UUID.randomUUID() + ".tsv");
        try (FileSystem fs = FileSystem.newInstance(target.toUri(), getConf())) {
            fs.setWriteChecksum(false); // no .crc file next to it on a local backend (an instance of our own)
            try (OutputStream out = fs.create(target, false)) {
                out.write(line.getBytes(StandardCharsets.UTF_8));
            }
        } catch (IOException e) {
            // the read goes on from another replica; the next verify finds this one
            REPORTED.remove(c[0] + "\t" + problem);
        }
    }

    private FileStatus ours(FileStatus s, Path asked) {
        return new FileStatus(s.getLen(), s.isDirectory(), 1, s.getBlockSize(), s.getModificationTime(),
                makeQualified(asked));
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        String[] at = split(f);
        String[] c = choose(parse(at[0]), at[1]).candidate;
        Path p = inCandidate(c, at[1]);
        return p.getFileSystem(getConf()).open(p, bufferSize);
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
        String[] at = split(f);
        if (at[0].equals(EMPTY) && at[1].isEmpty()) {
            return new FileStatus(0, true, 1, 0, 0, makeQualified(f));
        }
        String[] c = choose(parse(at[0]), at[1]).candidate;
        Path p = inCandidate(c, at[1]);
        return ours(p.getFileSystem(getConf()).getFileStatus(p), f);
    }

    @Override
    public FileStatus[] listStatus(Path f) throws FileNotFoundException, IOException {
        String[] at = split(f);
        if (!at[1].isEmpty()) {
            return new FileStatus[] {getFileStatus(f)};
        }
        if (at[0].equals(EMPTY)) {
            return new FileStatus[0];
        }
        Chosen chosen = choose(parse(at[0]), "");
        Path dir = inCandidate(chosen.candidate, "");
        FileStatus[] in = chosen.listing != null ? chosen.listing : dir.getFileSystem(getConf()).listStatus(dir);
        FileStatus[] out = new FileStatus[in.length];
        Path base = new Path(SCHEME + ":///" + at[0]);
        for (int i = 0; i < in.length; i++) {
            out[i] = ours(in[i], new Path(base, in[i].getPath().getName()));
        }
        return out;
    }

    @Override
    public BlockLocation[] getFileBlockLocations(FileStatus file, long start, long len) throws IOException {
        if (file == null) {
            return null;
        }
        String[] at = split(file.getPath());
        String[] c = choose(parse(at[0]), at[1]).candidate;
        Path p = inCandidate(c, at[1]);
        FileSystem fs = p.getFileSystem(getConf());
        return fs.getFileBlockLocations(fs.getFileStatus(p), start, len);
    }

    @Override
    protected IOException readOnly(Path f) {
        return new IOException(SCHEME + ":// is read-only (a registered bucket's replicas): " + f);
    }

    @Override
    public boolean mkdirs(Path f, FsPermission permission) {
        return true; // Spark's catalog makes sure a partition's LOCATION exists: it is the replicas'
    }
}
