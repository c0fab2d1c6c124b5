"""spark-submit entry point: ratio-spark lexicon extensions. Wiring only; the work is in ratio_spark.lexicon.curation.

    spark-submit --py-files ratio_spark.zip jobs/lexicon_extensions.py --conf emr --out ... [--set key=value ...]
"""

import sys

from ratio_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["lexicon", "extensions", *sys.argv[1:]]))
