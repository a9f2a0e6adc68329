"""A sweep on Spark (optional: `pip install pyspark`): the cases as a
DataFrame, `mapInPandas` runs them, rows come back as a DataFrame.

    python examples/fleet/spark.py [TRACE_OR_FOLDER ...]
"""

import dataclasses
import sys
from pathlib import Path

import vramlab

ROOT = Path(__file__).resolve().parents[2]


def run_cases(batches):
    import pandas as pd

    for batch in batches:
        rows = [vramlab.run_case(vramlab.Case(**rec)) for rec in batch.to_dict("records")]
        yield pd.DataFrame(rows, columns=[n for n, _ in vramlab.ROW_COLUMNS])


def main() -> None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("pyspark is not installed: pip install pyspark")
        return
    traces = sys.argv[1:] or [str(ROOT / "workloads" / "data" / "gpt-small-train.csv")]
    grid = ["default", "expandable_segments:True"]
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    cases = spark.createDataFrame([dataclasses.asdict(c) for c in vramlab.cases(traces, grid)])
    types = {int: "long", float: "double", str: "string", bool: "boolean"}
    schema = ", ".join(f"{n} {types[t]}" for n, t in vramlab.ROW_COLUMNS)
    rows = cases.mapInPandas(run_cases, schema=schema).orderBy("index").collect()
    assert vramlab.Rows(r.asDict() for r in rows) == vramlab.sweep(traces, grid)
    print(f"{len(rows)} rows on Spark")
    spark.stop()


if __name__ == "__main__":
    main()
