"""The fork server (drivers/executors/forkserver.py, forkclient.py): a command forked from it must
be the process `python ARGS` would have been — its argv, environment, folder, streams, exit code,
process group, cores and thread count — and signals must reach it as they reach a Popen'd one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fineprune_cli.drivers.executors.forkclient import ForkServer
from fineprune_cli.drivers.executors.forkserver import native_threads

SLEEP = "import time\nprint('up', flush=True)\ntime.sleep(60)"


@pytest.fixture(scope="session")
def server():
    with ForkServer(["torch", "torch._dynamo"]) as s:
        yield s


def _started(proc):
    assert proc.stdout.readline().strip() == "up"  # its handlers are in place: it printed after startup
    return proc


def test_a_command_gets_its_own_argv_env_folder_and_exit_code(server, tmp_path):
    code = "import os, sys; print(sys.argv[1:], os.getcwd(), os.environ['WHO'], 'HOME' in os.environ); sys.exit(3)"
    done = server.run(["-c", code, "a", "b"], capture_output=True, text=True, cwd=tmp_path, env={"WHO": "me"})
    assert (done.returncode, done.stdout, done.stderr) == (3, f"['a', 'b'] {tmp_path} me False\n", "")


def test_a_traceback_and_its_exit_code_are_pythons(server):
    done = server.run(["-c", "raise ValueError('boom')"], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.rstrip().endswith("ValueError: boom")


def test_a_script_and_a_module_run_as_main_with_their_folder_first_on_the_path(server, tmp_path):
    (tmp_path / "helper.py").write_text("WORD = 'found'\n")
    (tmp_path / "s.py").write_text("import sys, helper\nprint(__name__, helper.WORD, sys.argv)\n")
    done = server.run([str(tmp_path / "s.py"), "x"], capture_output=True, text=True, cwd="/")
    assert done.stdout == f"__main__ found {[str(tmp_path / 's.py'), 'x']}\n", done.stderr
    done = server.run(["-m", "helper"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_pythonpath_of_the_request_is_searched(server, tmp_path):
    (tmp_path / "extra_mod.py").write_text("print('extra')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    assert server.run(["-c", "import extra_mod"], capture_output=True, text=True, env=env).stdout == "extra\n"


def test_threads_and_cores_are_the_requests_not_the_servers(server):
    code = "import os, torch; print(torch.get_num_threads(), sorted(os.sched_getaffinity(0)))"
    core = sorted(os.sched_getaffinity(0))[-1]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = server.run(["-c", code], capture_output=True, text=True, env=env, cores=[core])
    assert done.stdout == f"1 [{core}]\n", done.stderr
    env.pop("OMP_NUM_THREADS")  # unset: one a core it may use, as OpenMP counts them
    done = server.run(["-c", code], capture_output=True, text=True, env=env, cores=[core])
    assert done.stdout == f"1 [{core}]\n", done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_its_group_reaches_it_and_its_code_says_so(server, sig):
    proc = _started(server.popen(["-c", SLEEP], stdout=subprocess.PIPE, text=True, process_group=0))
    assert os.getpgid(proc.pid) == proc.pid  # a group of its own, as Popen(process_group=0) gives
    os.killpg(proc.pid, sig)
    assert proc.wait(30) == -sig  # Python re-raises an unhandled SIGINT: killed by it, as `python` is
    proc.stdout.close()


def test_a_handled_sigterm_exits_with_the_handlers_code(server):
    code = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n" + SLEEP
    proc = _started(server.popen(["-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True))
    assert os.getsid(proc.pid) == proc.pid
    assert proc.poll() is None
    proc.terminate()
    assert proc.wait(30) == 7 and proc.poll() == 7
    proc.stdout.close()


def test_the_server_killed_kills_a_child_that_asked_to_die_with_it(tmp_path):
    with ForkServer([]) as own:
        proc = _started(own.popen(["-c", SLEEP], stdout=subprocess.PIPE, text=True, pdeathsig=signal.SIGTERM))
        own.server.kill()
        own.server.wait()
        for _ in range(300):
            try:
                os.kill(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the child outlived its server")
        assert proc.wait(5) == -signal.SIGKILL  # no status can come: the server's gone
        proc.stdout.close()


def test_a_preload_that_starts_a_thread_is_refused(tmp_path, monkeypatch):
    (tmp_path / "threaded_mod.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with ForkServer(["threaded_mod"]) as own:
        with pytest.raises(OSError, match="forking would be unsafe"):
            own.popen(["-c", "pass"])


def test_scipys_blas_pool_is_allowed_and_works_in_a_forked_child():
    """Lightning's metrics import scipy, whose own OpenBLAS starts a pool at load: a server may
    preload it (the pool stops and restarts itself around a fork), and a child's solve gives the
    answer, on two threads, with no deadlock."""
    code = "import numpy, scipy.linalg as L\nprint(L.solve(numpy.eye(300) * 2, numpy.ones(300)).sum())"
    with ForkServer(["scipy.linalg"]) as own:
        done = own.run(
            ["-c", code], capture_output=True, text=True, timeout=60, env={**os.environ, "OPENBLAS_NUM_THREADS": "2"}
        )
    assert (done.returncode, done.stdout) == (0, "150.0\n"), done.stderr


def test_preloading_torch_and_its_compiler_starts_no_thread_pool():
    code = (
        "import os, numpy\nfrom fineprune_cli.drivers.executors.forkserver import native_threads\n"
        "before = native_threads()\nimport torch, torch._dynamo, fineprune_cli.cli\nprint(native_threads() - before)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout == "0\n", done.stderr
    assert native_threads() >= 1


def test_its_command_line_is_the_commands_for_ps_and_pgrep(server, tmp_path):
    marker = str(tmp_path / "job.yaml")
    proc = _started(server.popen(["-c", SLEEP, marker], stdout=subprocess.PIPE, text=True))
    words = open(f"/proc/{proc.pid}/cmdline", "rb").read().rstrip(b"\0").split(b"\0")
    assert [w.decode() for w in words] == [sys.executable, "-c", SLEEP, marker]
    proc.kill()
    assert proc.wait(30) == -signal.SIGKILL
    proc.stdout.close()


def test_forkrun_exits_as_its_script_and_passes_a_sigterm_on(forked, tmp_path):
    """tests/forkrun, the `python` of scripts the tests fork: a script's exit code is its own, and
    a SIGTERM to the shim ends the script (ended by it, as a Popen'd script would be)."""
    env = {**os.environ, "FINEPRUNE_TEST_FORK": forked.address}
    shim = [sys.executable, str(Path(__file__).with_name("forkrun"))]
    (tmp_path / "three.py").write_text("import sys\nprint('ran', sys.argv[1:])\nraise SystemExit(3)\n")
    done = subprocess.run([*shim, str(tmp_path / "three.py"), "a"], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "ran ['a']\n"), done.stderr
    (tmp_path / "sleeps.py").write_text(SLEEP)
    proc = subprocess.Popen([*shim, str(tmp_path / "sleeps.py")], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == -signal.SIGTERM
    proc.stdout.close()
