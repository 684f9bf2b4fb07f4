# Install rules and the Debian package (CPack DEB): the binary, the systemd unit, a commented default config,
# the environment file, the `llama-server` link Ollama runs (under /usr/lib/kvtrie), and the docs.
include(GNUInstallDirs)

install(FILES ${PROJECT_SOURCE_DIR}/packaging/kvtrie.service DESTINATION lib/systemd/system)
# Configuration goes to /etc when installing under /usr (the Debian package), else under <prefix>/etc, decided
# at install time because CPack installs with its own prefix.
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(kvtrie_etc /etc)
  else()
    set(kvtrie_etc \"\${CMAKE_INSTALL_PREFIX}/etc\")
  endif()
  file(INSTALL \"${PROJECT_SOURCE_DIR}/packaging/kvtrie.conf\" DESTINATION \"\${kvtrie_etc}/kvtrie\")  # honours DESTDIR itself
  file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${kvtrie_etc}/default\")
  file(COPY_FILE \"${PROJECT_SOURCE_DIR}/packaging/kvtrie.default\" \"\$ENV{DESTDIR}\${kvtrie_etc}/default/kvtrie\")
")
# Ollama runs <dir>/llama-server; the link makes kvtrie answer in that role (see docs/ollama.md).
install(CODE "
  file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/kvtrie\")
  file(CREATE_LINK ../../bin/kvtrie \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/kvtrie/llama-server\" SYMBOLIC)
")
file(GLOB kvtrie_docs ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${kvtrie_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME kvtrie)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kvtrie maintainers <kvtrie@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference daemon with a prefix-trie KV cache shared by all conversations")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)  # dpkg-shlibdeps is slow; the dependencies are listed below
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libvulkan1, mesa-vulkan-drivers | nvidia-vulkan-icd, libcpp-httplib0.11, libssl3, libspdlog1.10, libsystemd0, libxxhash0, libicu72, libzmq5, adduser")
# postinst creates the kvtrie user; the /etc files are conffiles, so an upgrade keeps the operator's edits.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/postinst ${PROJECT_SOURCE_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
