# configs/local.mk: model and run presets shipped with the distribution.
dist_pkgdata_DATA = configs/gpt-tiny.args configs/gpt-tiny-shakespeare.args
