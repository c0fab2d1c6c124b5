"""spark-submit entry point: segment. Wiring only; the work is in ratio_spark.

    spark-submit --py-files ratio_spark.zip jobs/segment.py --conf emr [--set key=value ...]
"""

import sys

from ratio_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["segment", *sys.argv[1:]]))
