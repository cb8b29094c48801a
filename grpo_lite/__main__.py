"""``python -m grpo_lite`` runs the ``grpo-lite`` command."""

from grpo_lite.cli import main

raise SystemExit(main())
