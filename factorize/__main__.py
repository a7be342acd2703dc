"""``python -m factorize`` is the ``factorize`` command."""

import sys

from factorize.cli import main

sys.exit(main())
