"""``python -m conch``: the ``conch`` command."""

import sys

from conch.cli.main import main

sys.exit(main())
