"""pytest-xdist's `--dist loadscope` scheduler, mended so that a run ends after a worker
crash (a segfault in a test): `tests/conftest.py` installs it for the suite."""


def make_scheduler(config, log):
    """`--dist loadscope` whose run ends after a worker crash. pytest-xdist 3.8's
    `LoadScopeScheduling.remove_node` puts back every unit the dead worker ever had,
    finished ones too: those go out as empty units, which no worker ever reports done,
    and the run waits forever at its end (pytest-dev/pytest-xdist#1378; a CI run hung
    for an hour that way). Here only units with tests left go back, the test the worker
    died in (reported failed by xdist) is not run again, and a worker holds two tests or
    is told to stop after its last: a worker runs a test once it knows the next one or is
    told to stop, so a replacement given a single test would wait forever (#1327)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CrashSafeLoadScope(LoadScopeScheduling):
        def remove_node(self, node):
            workload = self.assigned_work.pop(node)
            pending = [nodeid for unit in workload.values() for nodeid, done in unit.items() if not done]
            if not pending:
                return None
            crashed = pending[0]  # a worker runs its units in order: the first not done
            for scope, unit in workload.items():
                if crashed in unit:
                    unit[crashed] = True
                if not all(unit.values()):
                    self.workqueue[scope] = unit
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

        def _assign_work_unit(self, node):
            try:
                super()._assign_work_unit(node)
            except OSError:  # the worker is gone: remove_node puts the unit back
                pass

        def _reschedule(self, node):
            if node not in self.registered_collections:
                return  # a replacement still collecting: scheduled when it has (#1189)
            super()._reschedule(node)
            if node not in self.assigned_work or node.shutting_down:
                return
            while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)
            if not self.workqueue:
                node.shutdown()

    return CrashSafeLoadScope(config, log)
