"""What an Iceberg table names for our files, and how its FileIO reaches our store. Pure: no
Spark, no database, no store."""

from __future__ import annotations

from airflow_colocate.iceberg.files import iceberg_uri, our_uri
from airflow_colocate.iceberg.publisher import s3_properties


def test_hadoop_s3_schemes_are_published_as_s3_and_read_back_as_ours():
    assert iceberg_uri("s3a://lake/be1/default/t_1/dt/v000001/b00000/part.parquet") == \
        "s3://lake/be1/default/t_1/dt/v000001/b00000/part.parquet"
    assert iceberg_uri("S3N://lake/x") == "s3://lake/x"
    for same in ("s3://lake/x", "file:///data/be1/x", "hdfs://nn:8020/be1/x", "/plain/path", "gs://b/s3a://x"):
        assert iceberg_uri(same) == same
    roots = ["s3a://lake/be1", "s3a://lake/be10/", "file:///data/be2"]
    assert our_uri("s3://lake/be1/default/t_1/b00000", roots) == "s3a://lake/be1/default/t_1/b00000"
    assert our_uri("s3://lake/be10/default/t_1/b00000", roots) == "s3a://lake/be10/default/t_1/b00000"
    assert our_uri("file:///data/be2/t/b00000", roots) == "file:///data/be2/t/b00000"
    assert our_uri("s3://elsewhere/x", roots) == "s3://elsewhere/x"  # no backend of ours: left as it is


def test_the_stores_address_and_region_become_fileio_properties():
    assert s3_properties({"AWS_ENDPOINT_URL": "http://127.0.0.1:8333", "AWS_REGION": "us-east-1",
                          "AWS_ACCESS_KEY_ID": "k"}) == {"s3.endpoint": "http://127.0.0.1:8333", "s3.region": "us-east-1"}
    assert s3_properties({"AWS_ENDPOINT_URL": "http://a", "AWS_ENDPOINT_URL_S3": "http://s3only",
                          "AWS_DEFAULT_REGION": "eu-west-1"}) == {"s3.endpoint": "http://s3only", "s3.region": "eu-west-1"}
    assert s3_properties({}) == {}
