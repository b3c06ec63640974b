"""A screenshot of optuna-dashboard on a study that PandoraSampler ran (docs/figures/).

The study: two parameters of a cost-aware toy objective, ``PandoraSampler(cost="reported",
budget=40, seed=0)`` with the ``StoppingCallback`` (PBGI/LogEIPC rule, λ = 1e-4), in a SQLite
storage. optuna-dashboard (``optuna_dashboard.wsgi``) serves it on a local port and headless
Chromium takes the screenshot, as ``crates/pandora-py/tests/test_optuna_dashboard.py`` renders
the DOM.

Two screenshots of one run: the study page (``--out``, default
docs/figures/optuna_dashboard.png) and the trials page (the same name with ``_trials``).

Run:  pip install . optuna optuna-dashboard && python examples/python/optuna_dashboard_screenshot.py
      (needs a ``chromium`` binary; ``--chromium`` names another)
"""

import argparse
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import optuna
import optuna_dashboard

import pandora.optuna


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def objective(trial):
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    width = trial.suggest_int("width", 16, 256, log=True)
    trial.set_user_attr("cost", 0.5 + width / 64.0)  # wider nets train longer
    return 0.95 - 0.02 * (abs(lr - 0.01) / 0.01) ** 0.5 - 2.0 / width


def run_study(storage):
    sampler = pandora.optuna.PandoraSampler(cost="reported", budget=40.0, seed=0)
    study = optuna.create_study(study_name="pandora-demo", storage=storage,
                                direction="maximize", sampler=sampler)
    study.optimize(objective, n_trials=200,
                   callbacks=[pandora.optuna.StoppingCallback(sampler, lam=1e-4)])
    return study


def screenshot(chromium, url, out, size, profile):
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                    "--hide-scrollbars", f"--window-size={size}",
                    "--virtual-time-budget=15000", f"--screenshot={out}", url],
                   capture_output=True, text=True, timeout=180, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/figures/optuna_dashboard.png",
                    help="the study page; the trials page goes to the same name + _trials")
    ap.add_argument("--size", default="1280,1760", help="window size of the study page")
    ap.add_argument("--trials-size", default="1280,1100", help="window size of the trials page")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out = Path(args.out).resolve()
    pages = [("", out, args.size),
             ("trials", out.with_name(out.stem + "_trials" + out.suffix), args.trials_size)]
    with tempfile.TemporaryDirectory() as tmp:
        storage = optuna.storages.RDBStorage(f"sqlite:///{Path(tmp) / 'demo.db'}")
        study = run_study(storage)
        print(f"{len(study.trials)} trials, best {study.best_value:.4f}, stop reason: "
              f"{study.user_attrs.get('pandora:stop_reason')}")
        server = make_server("127.0.0.1", 0, optuna_dashboard.wsgi(storage),
                             server_class=_Server, handler_class=_Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            base = f"http://127.0.0.1:{server.server_port}/dashboard/studies/{study._study_id}"
            for page, path, size in pages:
                url = f"{base}/{page}" if page else base
                screenshot(args.chromium, url, str(path), size, Path(tmp) / "chromium")
                print(f"wrote {path} ({path.stat().st_size} bytes)")
        finally:
            server.shutdown()


if __name__ == "__main__":
    main()
