# One line per shader variant: kvtrie_shader(<op>_<variant> <source>.comp [DEFINE=VALUE...]).
kvtrie_shader(fill_f32 fill.comp)
