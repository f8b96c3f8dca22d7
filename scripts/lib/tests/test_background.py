"""scripts/lib/background.sh: .ci/run fetches the later legs' downloads beside the Debian 12 build.
A step that fails in the background must still fail the run, with its own message and log, and
only when the leg that needs it waits for it; a step that succeeds lets the run go on."""
import os
import subprocess
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def run(body):
    with tempfile.TemporaryDirectory() as logs:
        script = f"""
            set -euo pipefail
            source {ROOT}/scripts/lib/setup.sh
            source {ROOT}/scripts/lib/background.sh
            logs={logs}
            {body}
        """
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr


def test_a_failed_background_step_fails_the_wait_with_its_own_message_and_log():
    rc, out, err = run("""
        sparsevit_background wheels "$logs" "the wheels" bash -c 'echo fetching; echo "no route to host" >&2; exit 3'
        echo "foreground work goes on"
        sparsevit_background_wait wheels "$logs"
        echo "not reached"
    """)
    assert rc == 1, (out, err)
    assert "foreground work goes on" in out  # the failure waited for the wait
    assert "not reached" not in out
    assert "no route to host" in err  # the step's own output
    assert "error: preparing the wheels failed (exit 3; log: " in err


def test_a_successful_background_step_runs_beside_the_foreground_and_reports_its_time():
    rc, out, err = run("""
        sparsevit_background root "$logs" "the root" bash -c 'sleep 1; echo made > "$0/made"' "$logs"
        test ! -e "$logs/made"   # still running: the foreground did not wait for it
        sparsevit_background_wait root "$logs"
        cat "$logs/made"
    """)
    assert rc == 0, (out, err)
    assert out.strip().endswith("made")
    assert "Prepared the root in the background in 1 s" in err


def test_two_steps_are_waited_for_separately():
    rc, out, err = run("""
        sparsevit_background a "$logs" "step a" true
        sparsevit_background b "$logs" "step b" false
        sparsevit_background_wait a "$logs"
        echo "a done"
        sparsevit_background_wait b "$logs"
    """)
    assert rc == 1 and "a done" in out, (out, err)
    assert "error: preparing step b failed" in err
