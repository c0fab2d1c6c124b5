"""spark-submit entry point: citations. Wiring only; the work is in ratio_spark.

    spark-submit --py-files ratio_spark.zip jobs/citations.py --conf emr [--set key=value ...]
"""

import sys

from ratio_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["citations", *sys.argv[1:]]))
