"""spark-submit entry point: ingest. Wiring only; the work is in ratio_spark.

    spark-submit --py-files ratio_spark.zip jobs/ingest.py --conf emr [--set key=value ...]
"""

import sys

from ratio_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
