"""The secret seed kept out of /proc: `reexec_without_secrets` re-executes eval.py with POPCORN_SEED and `--seed`
handed over through a pipe, so neither is in /proc/<pid>/environ or /proc/<pid>/cmdline (eval.py calls it first,
before torch is imported); `take_handed_secrets` reads them back in the re-executed process. Standard library only.
"""
from __future__ import annotations

import json
import os
import sys

SECRET_FD_ENV = "ARENA_SECRET_FD"


def _strip_seed_option(argv: list[str]) -> tuple[list[str], str | None]:
    kept, seed, skip = [], None, False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--seed" and i + 1 < len(argv):
            seed, skip = argv[i + 1], True
        elif arg.startswith("--seed="):
            seed = arg.split("=", 1)[1]
        else:
            kept.append(arg)
    return kept, seed


def reexec_without_secrets():
    """If POPCORN_SEED is in the environment or --seed on the command line, re-exec this process without them,
    handing the values over through an inherited pipe. The same pid continues (the runner still waits for
    it); its /proc/<pid>/environ and cmdline hold no secret. Returns only when there is nothing to do."""
    if SECRET_FD_ENV in os.environ:
        return
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    kept, cli_seed = _strip_seed_option(argv[1:])
    env_seed = os.environ.get("POPCORN_SEED")
    if env_seed is None and cli_seed is None:
        return
    read_end, write_end = os.pipe()
    os.write(write_end, json.dumps({"popcorn": env_seed, "cli": cli_seed}).encode())   # fits the pipe buffer
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {k: v for k, v in os.environ.items() if k != "POPCORN_SEED"}
    env[SECRET_FD_ENV] = str(read_end)
    try:
        os.execve(sys.executable, [sys.executable, *kept], env)
    except OSError:                            # cannot re-exec: the values stay where they are
        os.close(read_end)


def take_handed_secrets() -> dict:
    """{"popcorn": POPCORN_SEED or None, "cli": the --seed value or None}, from the re-exec pipe (read and
    closed) or, without a re-exec, popped from the environment."""
    fd = os.environ.pop(SECRET_FD_ENV, None)
    found = {"popcorn": os.environ.pop("POPCORN_SEED", None), "cli": None}
    if fd is not None:
        try:
            chunks = []
            while chunk := os.read(int(fd), 4096):
                chunks.append(chunk)
            found.update(json.loads(b"".join(chunks).decode()))
        finally:
            try:
                os.close(int(fd))
            except OSError:
                pass
    return found
