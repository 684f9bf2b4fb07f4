# kvtrie_library(NAME [DEPS kvtrie libraries...] [EXTERNAL targets...]): one static library per top-level
# folder. Sources are globbed so that adding a file never means editing a shared list; main.cpp files are
# entry points, not library code.
#
# Include roots: a folder's headers are included as "<folder>/...", found through the folder's own root,
# ${PROJECT_BINARY_DIR}/include/<folder>, which holds one link, <folder> -> the source folder. A library
# compiles with its own root and the roots of its DEPS only: roots are never passed on (a dependency's
# dependencies are linked, not included), so including a folder the library does not name in DEPS fails to
# compile. scripts/check-layering checks the direction of what DEPS allow. EXTERNAL targets (third-party
# libraries) and DEPS are linked PUBLIC, so their usage requirements (include paths, definitions) travel.
function(kvtrie_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;EXTERNAL" ${ARGN})
  get_filename_component(folder ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  set(root ${PROJECT_BINARY_DIR}/include/${folder})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${root}/${folder} SYMBOLIC)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  list(FILTER srcs EXCLUDE REGEX "/main\\.cpp$")
  add_library(${name} STATIC ${srcs} ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)
  set_target_properties(${name} PROPERTIES KVTRIE_INCLUDE_ROOT ${root})
  kvtrie_include_roots(${name} ${name} ${ARG_DEPS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} ${ARG_EXTERNAL} PRIVATE kvtrie_warnings)
endfunction()

# kvtrie_include_roots(TARGET LIBS...): TARGET compiles with the include roots of the kvtrie libraries LIBS
# (for an executable's main.cpp; tests and benchmarks include from the source tree instead).
function(kvtrie_include_roots target)
  foreach(lib ${ARGN})
    get_target_property(root ${lib} KVTRIE_INCLUDE_ROOT)
    target_include_directories(${target} PRIVATE ${root})
  endforeach()
endfunction()
