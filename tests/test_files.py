"""symgraph.files.write_atomically: what open(path, "w") would give for permissions (a new file: 0666 less the
umask; a replaced file keeps its mode), not mkstemp's 0600."""

import os
import stat

import numpy as np

import symgraph as sg


def test_saved_files_get_the_umask_s_mode_and_keep_an_existing_one(tmp_path):
    old = os.umask(0o022)
    try:
        p = tmp_path / "state.npz"
        sg.save_state(str(p), {"w": np.ones(3)})
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o644
        os.chmod(p, 0o640)
        sg.save_state(str(p), {"w": np.zeros(3)})
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o640
        np.testing.assert_array_equal(sg.load_state(str(p))["w"], np.zeros(3))
    finally:
        os.umask(old)
