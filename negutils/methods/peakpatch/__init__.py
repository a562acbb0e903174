"""PeakPatch (Lu et al. 2026): the ECN and SCN modules, their training on the feature cache, the
scorer for the shared evaluation, and the chapter's analyses."""
