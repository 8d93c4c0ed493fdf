"""What an evaluator leaves in the temporary folder when it is killed (its atexit handlers never run) is removed
by the next one: the jail's passwd copies (arena/isolation/bubblewrap.py), with real processes and SIGKILL."""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap

from arena.isolation import bubblewrap
from tests.evalrun import ROOT


def test_the_passwd_folder_of_a_killed_evaluator_is_removed_by_the_next_and_a_live_ones_is_kept(tmp_path,
                                                                                                  monkeypatch):
    script = textwrap.dedent("""
        import os, sys, time
        from arena.isolation import bubblewrap
        print(bubblewrap.passwd_file(os.getuid() + 1, "/home/jail"), flush=True)
        if sys.argv[1] == "die":
            os.kill(os.getpid(), 9)         # no atexit
        time.sleep(60)
    """)
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=ROOT)
    killed = subprocess.run([sys.executable, "-c", script, "die"], capture_output=True, text=True, env=env,
                            timeout=60)
    assert killed.returncode == -signal.SIGKILL
    dead = os.path.dirname(killed.stdout.strip())
    assert os.path.isfile(os.path.join(dead, "passwd"))          # left behind: its atexit never ran
    live = subprocess.Popen([sys.executable, "-c", script, "live"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        kept = os.path.dirname(live.stdout.readline().strip())
        assert not os.path.exists(dead), "the next evaluator left the killed one's folder"
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        mine = os.path.dirname(bubblewrap.passwd_file(os.getuid() + 1, "/home/jail"))
        assert os.path.isdir(kept) and os.path.isdir(mine), "a running evaluator's folder was removed"
        assert os.path.basename(mine).startswith(f"arena-passwd-{os.getpid()}-")
    finally:
        live.kill()
        live.wait()
