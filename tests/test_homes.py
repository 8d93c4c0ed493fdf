"""The jailed worker's kept home (arena/isolation/homes.py, jail.py): a run tidies it (everything but the build
cache, and the lock files a killed build left there) when no other run of the same file holds it, and a run's
own second worker (a restart) never stops it from tidying. Real processes hold the flock."""
import os
import subprocess
import sys
import time
import uuid

import pytest

from arena.isolation import bubblewrap
from arena.isolation.jail import Isolation
from arena.submission_file import SubmissionFile
from tests.evalrun import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or bubblewrap.find_bwrap() is None,
                                reason="the home belongs to the jail: Linux and bubblewrap")


def plant(home: str) -> tuple[str, str]:
    """What a killed run leaves: a file outside the cache, and torch's build lock inside it."""
    junk, lock = os.path.join(home, "tmp", "junk"), os.path.join(home, "cache", "torch_extensions", "ext", "lock")
    for path in (junk, lock):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").close()
    return junk, lock


def test_a_run_tidies_its_home_unless_another_run_of_the_file_holds_it(tmp_path):
    source = tmp_path / "sub.py"
    source.write_text(f"# {uuid.uuid4().hex}\ndef custom_kernel(data):\n    return data[-1]\n")
    submission = SubmissionFile.read(str(source))
    first = Isolation(submission, True)
    if first.home is None:
        pytest.skip(f"no jail here: {first.state}")
    junk, lock = plant(first.home)
    Isolation(submission, True)         # this run's second worker (a restart) tidies at its start
    assert not os.path.exists(junk) and not os.path.exists(lock)
    junk, lock = plant(first.home)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); "
         "from arena.isolation import homes; homes.claim_home(sys.argv[2]); print('held', flush=True); "
         "time.sleep(60)", ROOT, submission.sha256[:24]], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        first.tidy_home()                # another run of the file may be building in the home: left alone
        assert os.path.exists(junk) and os.path.exists(lock)
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    first.tidy_home()                    # alone again
    assert not os.path.exists(junk) and not os.path.exists(lock)
