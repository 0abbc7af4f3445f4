# jobs/local.mk: the Slurm job tooling: the renderer (jobs/mkjob), the local launcher, the sbatch
# and local templates, the large-model presets and the example renders (its test,
# tests/slurm/slurm_test.sh, is registered in tests/local.mk).
# Included from Makefile.am. mkjob finds its templates next to itself or, installed in $(bindir),
# in $(pkgdatadir)/jobs/templates, and presets in configs/ or $(pkgdatadir).
dist_bin_SCRIPTS = jobs/mkjob jobs/launch_local jobs/run_with_restarts
jobstemplatesdir = $(pkgdatadir)/jobs/templates
dist_jobstemplates_DATA = jobs/templates/sbatch.sh \
	jobs/templates/local.sh
jobspresetsdir = $(pkgdatadir)
dist_jobspresets_DATA = configs/gpt-1.3b.args configs/gpt3-175b.args
EXTRA_DIST += jobs/README.md jobs/examples/gpt-1.3b-1x8.sbatch jobs/examples/gpt3-175b-128x8.sbatch \
	jobs/examples/llama3-8b-1x8.sbatch

dist_jobstemplates_DATA += jobs/templates/accept.sbatch
