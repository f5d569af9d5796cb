"""``python -m agentgraph`` (same as the ``agentgraph`` command)."""

import sys

from agentgraph.frontends.cli import main

sys.exit(main())
