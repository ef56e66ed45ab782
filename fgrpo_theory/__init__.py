"""fgrpo-theory: the theory of F-GRPO (arXiv 2602.06717) as closed forms, a simulator and figures.

Use it as ``import fgrpo_theory as ft``; every name in the catalogue below is reachable as
``ft.<name>``. Names are imported on first use (PEP 562), so ``import fgrpo_theory`` is cheap: it
loads neither Numba nor matplotlib nor the simulator, and ``ft.tail_miss_probability`` loads only
its own module.
Closed forms broadcast like ``scipy.stats``: Python floats for scalar inputs, NumPy arrays
otherwise, and a pandas Series keeps its index. Equation labels "(P-n)" are equation n of
arXiv 2602.06717 v2; ``docs/theory.md`` restates the science and ``docs/equations.md`` maps each
equation to the one function that computes it.
"""

__version__ = "0.1.0"

# The catalogue is the one list of the top-level names: each heading names, first in its
# parentheses, the module that defines its entries, and each entry is "   name   -- summary".
# It is a string of its own (appended to __doc__) so that ``python -OO`` keeps it.
_CATALOGUE = """
Closed forms: tail miss (fgrpo_theory.tail_miss)
------------------------------------------------
   active_probability                    -- Pr(A_N) that a group of N is active (P-7)
   hit_probability                       -- Pr(at least one rollout in a subset of mass tau)
   tail_miss_probability                 -- Pr(B), active yet missing a rare mode (Lemma 3.1)
   tail_miss_probability_given_active    -- Pr(B | A_N), what dynamic sampling keeps
   expected_missed_modes                 -- expected number of rare modes an active group misses
   all_modes_missed_probability          -- Pr(an active group misses every rare mode)

Closed forms: peak over the group size (fgrpo_theory.tail_miss)
---------------------------------------------------------------
   peak_group_size                       -- integer and continuous argmax N* of Pr(B)
   PeakResult                            -- (n_star, n_star_continuous, p_peak)

Closed forms: advantages and focal weights (fgrpo_theory.advantages)
--------------------------------------------------------------------
   AdvantageConvention                   -- how a group of rewards becomes advantages
   get_convention                        -- a preset convention (grpo, trl, verl, ...) by name
   group_advantages                      -- advantages of every rollout of groups (P-3)
   binary_advantages                     -- A+ and A- of a binary group in closed form
   focal_weight                          -- g = (1 - mu_hat)^gamma (P-12)
   focal_advantages                      -- A_F = g * A (P-13)
   weighted_magnitudes                   -- g |A+| and g |A-| against mu (Fig. 4)
   lr_multiplier                         -- m_gamma of appendix N
   effective_lr_multiplier               -- focal step-size factor on a population (section 13)

Training schemes (fgrpo_theory.schemes; docs/theory.md section 15)
-------------------------------------------------------------------
   parse_scheme                          -- a scheme spec ('maxrl', 'trl+focal:gamma=1') parsed
   Scheme                                -- advantage term + focal weight + regularizers
   SCHEMES                               -- the registry: every scheme, one entry each
   difficulty_profile                    -- H(mu; N): expected update = H grad mu
   implied_objective                     -- F(mu) with F' = H: what a scheme ascends
   passk_weights                         -- c_1..c_N: a scheme optimizes sum_k c_k pass@k
   scheme_lr_multiplier                  -- lr factor matching a scheme's step to GRPO's
   Beta                                  -- Beta(a, b) difficulty distribution of pass rates
   scheme_catalog                        -- the registry as a table (scheme list)
   scheme_profile_table                  -- H, F and c_k over mu (the scheme command)

Closed forms: pass@k (fgrpo_theory.passk)
-----------------------------------------
   pass_at_k                             -- unbiased estimator 1 - C(n-c, k) / C(n, k)
   pass_at_k_exact                       -- 1 - (1 - mu)^k of a categorical policy

Tidy tables (fgrpo_theory.tables; DataFrames with the CLI's columns)
--------------------------------------------------------------------
   tail_miss_table                       -- p_active, p_tail_miss, p_hit over N x mu x rho
   peak_table                            -- n_star, n_star_continuous, p_peak over mu x rho
   focal_table                           -- focal weights and weighted advantages over mu x gamma
   passk_table                           -- pass@k over n, c, k or mu, k

Policies (fgrpo_theory.policy)
------------------------------
   policy_from_specs                     -- logits and correct mask from two specs
   paper_policy                          -- the simulation start of appendix J
   probabilities                         -- softmax(logits)
   log_probabilities                     -- log softmax(logits)
   success_probability                   -- mu = pi(C) (P-2)
   load_logits                           -- logits from a spec, .npy or .csv
   load_correct_mask                     -- correct mask (booleans or 0/1) from a .npy or .csv file
   load_policy                           -- logits and correct mask together

Mass redistribution (fgrpo_theory.mass; one update of a softmax policy)
-----------------------------------------------------------------------
   Group                                 -- a sampled group, sparse
   make_group                            -- a Group from actions and counts
   sample_group                          -- draw a Group from softmax(logits)
   GroupStatistics                       -- Q_pos, P_pos, A2, B2, U2, S_R, ... of a group
   group_statistics                      -- the statistics of one group
   P17Terms                              -- terms of the total correct mass change
   P10Terms                              -- terms of the unsampled correct mass change
   total_correct_change_p17              -- first-order change of Q_pos (P-17)
   unsampled_correct_change_p10          -- first-order change of Q_u (Proposition 3.2, P-10)
   logit_step                            -- logit change of one update (P-5)
   prob_change_first_order               -- first-order softmax change (P-18)
   subset_change_first_order             -- first-order change of a subset's mass (P-19)
   exact_prob_change                     -- exact softmax(z + dz) - softmax(z)
   exact_subset_change                   -- exact change of a subset's mass
   OneStepResult                         -- first-order and exact changes of one update
   one_step                              -- one update on one group, decomposed
   expected_unsampled_square_mass        -- E[U2] = sum p^2 (1 - p)^N
   expected_sampled_mass_given_correct   -- E[P_pos | X=k], E[P_neg | X=k] (Lemma H.1)
   expected_baseline_given_correct       -- E[S_R | X=k] (Corollary H.2)
   LogprobDrift                          -- expected drift of the log-prob update
   expected_logprob_drift                -- the expected log-prob step (docs/theory.md sec. 6)
   count_outcomes                        -- number of distinct group outcomes
   ExpectationResult                     -- expectations over the group draw
   expected_change                       -- expected one-step change by enumeration or MC

Simulator (fgrpo_theory.sim; Numba, compiled on the first simulation)
---------------------------------------------------------------------
   SimConfig                             -- one simulated experiment, validated
   simulate                              -- run every prompt x seed of a SimConfig
   load_config                           -- read a TOML config file

Shipped configurations (fgrpo_theory.sim.presets)
-------------------------------------------------
   preset_names                          -- names of the shipped paper configurations
   load_preset                           -- a shipped configuration by name

Sweeps (fgrpo_theory.sim)
-------------------------
   expand_grid                           -- list-valued fields to a grid of SimConfigs
   load_sweep                            -- a TOML sweep file as a list of SimConfigs
   run_sweep                             -- run a sweep with resumable per-config results

Distributed sweeps (fgrpo_theory.distributed)
---------------------------------------------
   run_sweep_distributed                 -- the same on a Dask cluster (extra "dask")

Self-check (fgrpo_theory.validation)
------------------------------------
   run_validation                        -- every closed form against its oracle

Fair focal comparisons (fgrpo_theory.fair; docs/theory.md section 11)
---------------------------------------------------------------------
   run_comparison                        -- focal run beside matched vanilla controls
   paired_differences                    -- focal - control at equal progress, paired by seed
   paired_bootstrap_interval             -- paired percentile-bootstrap interval of a difference
   two_level_interval                    -- paired interval over population draws, then seeds
   bimodality_coefficient                -- Sarle's coefficient: do seed outcomes split in two?

Learning rates (fgrpo_theory.fair; docs/learning-rates.md)
----------------------------------------------------------
   lr_advice                             -- the lr to run focal at, from a vanilla lr and optimizer
   LrAdvice                              -- its answer: focal_lr, control_lr, step_ratio, why
   step_ratio                            -- focal's expected step over vanilla's on your prompts

Prompt populations (fgrpo_theory.population; docs/theory.md section 13)
-----------------------------------------------------------------------
   PopulationConfig                      -- P prompts over K shared strategies, theta + phi_p
   generate_population                   -- the population of a config, from its seed
   simulate_population                   -- train on batches of prompts; train/test metrics

Your own runs (fgrpo_theory.diagnose; theory sections 12-14; report: ``ft.diagnose.diagnose``)
----------------------------------------------------------------------------------------------
   read_log                              -- read a training log (CSV, Parquet, JSON Lines)
   fit_beta_binomial                     -- beta-binomial fit of per-prompt success rates

Significance (fgrpo_theory.significance)
----------------------------------------
   compare_passk                         -- paired m-out-of-n test of a pass@k difference

Submodules
----------
``tail_miss``, ``advantages``, ``schemes``, ``passk``, ``policy``, ``tables``, ``mass``, ``sim``,
``fair``, ``population``, ``diagnose``, ``significance``, ``distributed``, ``validation``,
``sequence`` (a transformer over token sequences; its model, SFT, exact metrics and RL modules
need PyTorch, the extra ``[torch]``), ``plotting`` (matplotlib; import it explicitly).
"""

__doc__ = f"{__doc__ or ''}{_CATALOGUE}"


def _names_by_module(catalogue: str) -> dict[str, str]:
    """Public name -> the module that defines it, read from the catalogue's headings and entries.

    A heading is a line that starts with a non-blank and names ``(fgrpo_theory...`` (the module,
    ended by ``)`` or ``;``); an entry is three blanks, a name, blanks and ``-- ``. Plain string
    operations, not :mod:`re`: importing ``re`` (with ``enum``) was most of what ``import
    fgrpo_theory`` cost, and it runs before the console script's Ctrl-C handler is installed."""
    table: dict[str, str] = {}
    module = ""
    for line in catalogue.splitlines():
        if line[:1].strip() and "(fgrpo_theory" in line:
            rest = line.split("(fgrpo_theory", 1)[1]
            end = min((i for i in (rest.find(")"), rest.find(";")) if i >= 0), default=-1)
            if end >= 0:
                module = "fgrpo_theory" + rest[:end]
        elif line.startswith("   ") and not line[3:4].isspace() and " -- " in line:
            name, _, _ = line[3:].partition(" ")
            if name.isidentifier() and line[3 + len(name) :].lstrip().startswith("-- "):
                table[name] = module
    return table


#: Public name -> the module that defines it (imported on first access).
_LAZY: dict[str, str] = _names_by_module(_CATALOGUE)

#: Submodules reachable as attributes (``ft.mass``, ``ft.sim``, ...), also imported on first use.
_SUBMODULES = (
    "tail_miss",
    "advantages",
    "schemes",
    "passk",
    "policy",
    "tables",
    "mass",
    "sim",
    "fair",
    "population",
    "diagnose",
    "significance",
    "distributed",
    "validation",
    "sequence",
    "plotting",
)

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> object:
    """Import a public name (or a submodule) on first access (PEP 562)."""
    import importlib

    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later accesses skip this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """Public names, submodules and ``__version__`` (what tab completion should offer)."""
    return sorted({*__all__, *_SUBMODULES, "__version__"})
