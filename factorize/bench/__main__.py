"""``python -m factorize.bench [--suite NAME] [options]`` = ``factorize bench …``."""

import sys

from factorize.cli.app import main

sys.exit(main(["bench", *sys.argv[1:]]))
