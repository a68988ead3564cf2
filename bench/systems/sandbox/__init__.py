"""How a system under test is confined: its fresh working folder, the paths it may never see and its
scrubbed environment (workdir.py), the only code shown to it and the content check of that code
(declared.py, code_content.py), which sandbox runs it -- system bwrap, pip bwrap or Landlock -- and why
the others did not (isolation.py), the Landlock launcher (landlock_exec.py) and the reaper that lets
nothing it starts outlive it (reaper.py). docs/systems.md, *The sandbox*."""
