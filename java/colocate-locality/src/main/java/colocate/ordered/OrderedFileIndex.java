package colocate.ordered;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.BaseOrdering;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.RowOrdering;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A colocate backing table's file index that lists its partitions in ascending order of their
 * values, so a bucketed scan reads a bucket's files day by day: Spark groups a bucket's files in
 * the order the index lists them, and the in-memory catalog lists partitions in hash order.
 *
 * <p>The listing is kept for the filters it was made for: the rule lists once to decide and the
 * scan reuses that listing instead of listing every directory again.
 */
public final class OrderedFileIndex implements FileIndex {
    private final FileIndex inner;
    private transient Seq<Expression> lastPartitionFilters;
    private transient Seq<Expression> lastDataFilters;
    private transient Seq<PartitionDirectory> lastListing;

    public OrderedFileIndex(FileIndex inner) {
        this.inner = inner;
    }

    @Override
    public synchronized Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
        if (lastListing != null && Objects.equals(partitionFilters, lastPartitionFilters)
                && Objects.equals(dataFilters, lastDataFilters)) {
            return lastListing;
        }
        List<PartitionDirectory> dirs = new ArrayList<>(CollectionConverters.asJava(inner.listFiles(partitionFilters, dataFilters)));
        List<DataType> types = new ArrayList<>();
        for (StructField f : partitionSchema().fields()) {
            types.add(f.dataType());
        }
        if (!types.isEmpty()) {
            BaseOrdering ordering = RowOrdering.createNaturalAscendingOrdering(CollectionConverters.asScala(types).toList());
            dirs.sort((a, b) -> ordering.compare(a.values(), b.values()));
        }
        lastPartitionFilters = partitionFilters;
        lastDataFilters = dataFilters;
        lastListing = CollectionConverters.asScala(dirs).toList();
        return lastListing;
    }

    @Override
    public Seq<Path> rootPaths() {
        return inner.rootPaths();
    }

    @Override
    public String[] inputFiles() {
        return inner.inputFiles();
    }

    @Override
    public synchronized void refresh() {
        lastListing = null;
        inner.refresh();
    }

    @Override
    public long sizeInBytes() {
        return inner.sizeInBytes();
    }

    @Override
    public StructType partitionSchema() {
        return inner.partitionSchema();
    }

    @Override
    public scala.Option<Object> metadataOpsTimeNs() {
        return inner.metadataOpsTimeNs();
    }

    @Override
    public String toString() {
        return "Ordered" + inner.toString();
    }
}
