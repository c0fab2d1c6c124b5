"""spark-submit entry point: pools. Wiring only; the work is in ratio_spark.

    spark-submit --py-files ratio_spark.zip jobs/pools.py --conf emr [--set key=value ...]
"""

import sys

from ratio_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["pools", *sys.argv[1:]]))
