// A MiniDFSCluster (one NameNode, three DataNodes) for the tests: tests/hdfsserver.py compiles and
// runs it against hadoop-client-minicluster and prints "READY <uri>" once it is up.
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public class MiniHdfs {
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set("hdfs.minidfs.basedir", args[0]);
    conf.set("dfs.permissions.enabled", "false");
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(3)
        .nameNodePort(Integer.parseInt(args[1])).format(true).build();
    cluster.waitActive();
    System.out.println("READY " + cluster.getURI());
    System.out.flush();
    Thread.currentThread().join();
  }
}
