"""``python -m zhongshu_node``: the zhongshu-node CLI (cli.py)."""

import sys

from .cli import main

sys.exit(main())
