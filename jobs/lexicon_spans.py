"""spark-submit entry point: ratio-spark lexicon spans. Wiring only; the work is in ratio_spark.lexicon.curation.

    spark-submit --py-files ratio_spark.zip jobs/lexicon_spans.py --conf emr --out ... [--set key=value ...]
"""

import sys

from ratio_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["lexicon", "spans", *sys.argv[1:]]))
