"""optuna-dashboard on a study PandoraSampler ran: the study page and the trials page, rendered by
headless Chromium (DOM only), show the trials and Pandora's user attributes (docs/optuna.md, "In
optuna-dashboard"). Skipped without optuna, optuna-dashboard (CI pins it in
.ci/python-tests.sh) or a Chromium binary."""

import os
import shutil
import subprocess
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

optuna = pytest.importorskip("optuna", reason="optuna is not installed")
optuna_dashboard = pytest.importorskip("optuna_dashboard",
                                       reason="optuna-dashboard is not installed")
CHROMIUM = next((p for p in (os.environ.get("PANDORA_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary")

import pandora.optuna as po  # noqa: E402


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def _dom(url, tmp_path):
    """The page's DOM after its scripts ran."""
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium'}",
                          "--virtual-time-budget=10000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


def test_dashboard_shows_trials_and_pandora_attributes(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'dash.db'}")
    sampler = po.PandoraSampler(seed=0, initial_design=3, budget=6)
    study = optuna.create_study(study_name="pandora-dash", storage=storage, sampler=sampler)

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        trial.set_user_attr("cost", 1.0 + x)
        return (x - 0.3) ** 2

    study.optimize(objective, n_trials=20,
                   callbacks=[po.StoppingCallback(sampler, lam=1e-9)])
    assert len(study.trials) == 6
    server = make_server("127.0.0.1", 0, optuna_dashboard.wsgi(storage), server_class=_Server,
                         handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}/dashboard/studies/{study._study_id}"
        home = _dom(base, tmp_path)
        trials = _dom(base + "/trials", tmp_path)
    finally:
        server.shutdown()
    # The study page: its name and Pandora's study user attributes (the stopping rule's last
    # check; the table shows its first rows, pandora:stop_reason is on its next page).
    assert "pandora-dash" in home and "Study User Attributes" in home
    for key in ("pandora:stopping:rule", "pandora:stopping:lambda",
                "pandora:stopping:statistic"):
        assert key in home, key
    # The trials page: every trial, and the selected trial's user attributes.
    for t in study.trials:
        assert f"Trial {t.number}" in trials, t.number
    assert "User Attributes" in trials and "cost" in trials
