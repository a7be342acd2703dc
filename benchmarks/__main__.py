"""``python -m benchmarks [--threads N|max] [--suite NAME] [suite options] | --list``."""

import sys

from benchmarks import main

sys.exit(main())
