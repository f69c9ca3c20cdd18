import subprocess
import sys


def test_import_tsevo_is_light():
    code = (
        "import sys, tsevo, tsevo.data, tsevo.widgets; "
        "heavy = [m for m in ('torch', 'chronos', 'jupyter_client', 'ipykernel', 'transformers') "
        "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
